// Device helpers shared by the kernels in kernels/: 16-byte bf16 vectors, warp
// and block sums, and the cast from the launcher headers' Bf16 to CUDA's type.
// Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16.h"

namespace sextant::kernels::detail {

/// Elements per 16-byte access: memory-bound kernels move 16 bytes per thread
/// per load, the widest single access (HOPPER.md: "16-byte accesses per thread").
inline constexpr int kBf16PerVector = 8;
inline constexpr int kWarpSize = 32;

inline const __nv_bfloat16* cuda_bf16(const Bf16* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}
inline __nv_bfloat16* cuda_bf16(Bf16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

/// Unpacks 8 bf16 held in one 16-byte register quad.
__device__ __forceinline__ void unpack_bf16x8(const uint4& raw, float (&out)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

/// Loads 8 consecutive bf16 (16-byte aligned) as floats.
__device__ __forceinline__ void load_bf16x8(const __nv_bfloat16* p, float (&out)[8]) {
  unpack_bf16x8(*reinterpret_cast<const uint4*>(p), out);
}

/// Rounds 8 floats to bf16 (nearest even) and stores them (16-byte aligned).
__device__ __forceinline__ void store_bf16x8(__nv_bfloat16* p, const float (&in)[8]) {
  uint4 raw;
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Sum over all threads of a 1-D block; every thread gets the result.
/// `scratch` holds one T per warp. The order of additions is fixed by the
/// block shape, so the result is the same on every run.
template <typename T>
__device__ __forceinline__ T block_sum(T value, T* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : T(0);
  return warp_sum(value);
}

}  // namespace sextant::kernels::detail
