// What the kernel benchmarks share: a zero-filled device allocation freed at
// scope exit, bf16 noise to fill GEMM operands with (tensor cores draw less
// power on zeros and run faster on them: KINDS.md, 894 vs 788 TFLOP/s), and the
// L2's size (to flush it by writing twice as much).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"

namespace sextant::kernels::bench {

class Buffer {
 public:
  explicit Buffer(std::size_t bytes) {
    SEXTANT_CUDA_CHECK(cudaMalloc(&data_, bytes));
    SEXTANT_CUDA_CHECK(cudaMemset(data_, 0, bytes));
  }
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
};

/// Fills `count` bf16 values with uniform noise in [-scale, scale).
inline void fill_random_bf16(const Buffer& buffer, std::size_t count, float scale = 1.0f) {
  std::vector<Bf16> host(count);
  std::uint32_t state = 2463534242u;  // xorshift32: fast, and quality does not matter here
  for (auto& v : host) {
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    v = from_float(scale * (static_cast<float>(state) * 0x1p-31f - 1.0f));
  }
  SEXTANT_CUDA_CHECK(cudaMemcpy(buffer.as<void>(), host.data(), count * sizeof(Bf16), cudaMemcpyHostToDevice));
}

/// The current device's L2 cache, in bytes.
inline std::size_t l2_bytes() {
  int device = 0, bytes = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device));
  return static_cast<std::size_t>(bytes);
}

}  // namespace sextant::kernels::bench
