#include "tools/visible_gpu.h"

#include <cuda_runtime_api.h>

#include "sim/core/config_error.h"

namespace sextant::tools {

void require_visible_gpu(const std::string& where, const std::string& index_name, int index) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) cudaGetLastError();  // not sticky: clear it for whoever asks next
  auto refuse = [&](const std::string& message) { throw sim::ConfigError({{where, 0, 0, "", message}}); };
  if (status != cudaSuccess || count == 0)
    refuse(std::string("no CUDA GPU is visible (") + (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
           "); `sextant run` needs one");
  if (index < 0 || index >= count)
    refuse(index_name + " " + std::to_string(index) + ": this machine has " + std::to_string(count) +
           " GPU(s), indices 0-" + std::to_string(count - 1));
}

}  // namespace sextant::tools
