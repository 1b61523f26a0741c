#include "kernels/cuda_check.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

namespace sextant::kernels {

CudaError::CudaError(std::string call, std::string file, int line, std::string status_name,
                     std::string description)
    : std::runtime_error(file + ":" + std::to_string(line) + ": " + call + ": " + status_name +
                         ": " + description),
      call_(std::move(call)),
      file_(std::move(file)),
      line_(line),
      status_name_(std::move(status_name)) {}

void check_cuda(int status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  const auto error = static_cast<cudaError_t>(status);
  throw CudaError(call, file, line, cudaGetErrorName(error), cudaGetErrorString(error));
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return;
  throw CudaError(std::string(kernel) + " launch", file, line, cudaGetErrorName(error),
                  cudaGetErrorString(error));
}

void require_argument(bool ok, const char* launcher, const std::string& what) {
  if (!ok) throw KernelArgumentError(std::string(launcher) + ": " + what);
}

bool is_aligned(const void* pointer, unsigned bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

}  // namespace sextant::kernels
