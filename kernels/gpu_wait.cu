#include "kernels/gpu_wait.h"

#include <string>

#include "kernels/cuda_check.h"

namespace sextant::kernels {
namespace {

__device__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gpu_wait_kernel(std::uint64_t nanoseconds) {
  const std::uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) __nanosleep(500);
}

}  // namespace

void gpu_wait(std::int64_t nanoseconds, cudaStream_t stream) {
  require_argument(nanoseconds >= 0, "gpu_wait", "nanoseconds (" + std::to_string(nanoseconds) + ") must be >= 0");
  gpu_wait_kernel<<<1, 1, 0, stream>>>(static_cast<std::uint64_t>(nanoseconds));
  SEXTANT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sextant::kernels
