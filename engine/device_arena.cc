#include "engine/device_arena.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "kernels/cuda_check.h"

namespace sextant::engine {

DeviceArena::DeviceArena(const ArenaPlan& plan) : plan_(plan) {
  if (plan_.total_bytes() == 0) return;
  const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&base_), plan_.total_bytes());
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky out-of-memory status
    char call[96];
    std::snprintf(call, sizeof call, "cudaMalloc(%.2f GiB for the engine's arena)",
                  static_cast<double>(plan_.total_bytes()) / (1u << 30));
    kernels::check_cuda(status, call, __FILE__, __LINE__);
  }
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) cudaFree(base_);
}

}  // namespace sextant::engine
