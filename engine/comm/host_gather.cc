#include "engine/comm/host_gather.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace sextant::engine::comm {

std::vector<float> all_gather_on_host(Communicator& group, float value, std::chrono::milliseconds timeout) {
  const auto n = static_cast<std::size_t>(group.size());
  std::vector<float> out(n);
  float* device = nullptr;  // [value, gathered...]
  SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), (n + 1) * sizeof(float)));
  try {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(device, &value, sizeof(float), cudaMemcpyHostToDevice, group.stream()));
    group.all_gather(device, device + 1, 1, DataType::kFp32);
    group.synchronize(timeout);
    SEXTANT_CUDA_CHECK(cudaMemcpy(out.data(), device + 1, n * sizeof(float), cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(device);
    throw;
  }
  SEXTANT_CUDA_CHECK(cudaFree(device));
  return out;
}

}  // namespace sextant::engine::comm
