#include "kernels/parameter_init.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

constexpr int kThreads = 256;

// SplitMix64's output function (Steele, Lea & Flood 2014, "Fast splittable
// pseudorandom number generators"): a bijective 64-bit mixer.
__host__ __device__ inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One standard normal per (seed, stream, index): two 24-bit uniforms in (0, 1]
// and [0, 1) from one 64-bit hash, then Box-Muller's cosine branch. Computed
// in double on both sides: CUDA's and glibc's log and cos may differ in the
// last bit of a double, which the cast to float almost always absorbs.
__host__ __device__ inline float normal_at(std::uint64_t seed, std::uint64_t stream_id,
                                           std::uint64_t index) {
  const std::uint64_t key = mix64(seed ^ mix64(stream_id + 0x9e3779b97f4a7c15ULL));
  const std::uint64_t bits = mix64(key + index * 0x9e3779b97f4a7c15ULL);
  const double u1 = (static_cast<double>(bits >> 40) + 1.0) * (1.0 / 16777216.0);  // (0, 1]
  const double u2 = static_cast<double>((bits >> 16) & 0xffffffULL) * (1.0 / 16777216.0);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return static_cast<float>(sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2));
}

__global__ void fill_normal_kernel(float* out, std::size_t n, float mean, float stddev,
                                   std::uint64_t seed, std::uint64_t stream_id) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = mean + stddev * normal_at(seed, stream_id, i);
}

__global__ void fill_normal_block_kernel(float* out, std::size_t out_ld, std::size_t rows, std::size_t cols,
                                         std::size_t whole_cols, std::size_t row0, std::size_t col0, float mean,
                                         float stddev, std::uint64_t seed, std::uint64_t stream_id) {
  const std::size_t n = rows * cols;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = k / cols, j = k % cols;
    out[i * out_ld + j] = mean + stddev * normal_at(seed, stream_id, (row0 + i) * whole_cols + col0 + j);
  }
}

__global__ void fill_constant_kernel(float* out, std::size_t n, float value) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = value;
}

__global__ void convert_to_bf16_kernel(__nv_bfloat16* out, const float* in, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

// Grid-stride loops: enough blocks to fill any GPU, never more than the data needs.
unsigned blocks_for(std::size_t n) {
  const std::size_t needed = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(needed, 1, 65536));
}

}  // namespace

float standard_normal_at(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t index) {
  return normal_at(seed, stream_id, index);
}

void fill_normal(float* out, std::size_t n, float mean, float stddev, std::uint64_t seed,
                 std::uint64_t stream_id, cudaStream_t stream) {
  if (n == 0) return;
  require_argument(out != nullptr, "fill_normal", "out is null");
  fill_normal_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, n, mean, stddev, seed, stream_id);
  SEXTANT_CHECK_LAUNCH("fill_normal_kernel");
}

void fill_normal_block(float* out, std::size_t out_ld, std::size_t rows, std::size_t cols, std::size_t whole_cols,
                       std::size_t row0, std::size_t col0, float mean, float stddev, std::uint64_t seed,
                       std::uint64_t stream_id, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  require_argument(out != nullptr, "fill_normal_block", "out is null");
  require_argument(cols <= out_ld && col0 + cols <= whole_cols, "fill_normal_block",
                   "the block's columns must fit its row stride and the whole tensor's width");
  fill_normal_block_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(out, out_ld, rows, cols, whole_cols, row0,
                                                                             col0, mean, stddev, seed, stream_id);
  SEXTANT_CHECK_LAUNCH("fill_normal_block_kernel");
}

void fill_constant(float* out, std::size_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  require_argument(out != nullptr, "fill_constant", "out is null");
  fill_constant_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, n, value);
  SEXTANT_CHECK_LAUNCH("fill_constant_kernel");
}

void convert_to_bf16(Bf16* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  require_argument(out != nullptr && in != nullptr, "convert_to_bf16", "a pointer is null");
  convert_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(detail::cuda_bf16(out), in, n);
  SEXTANT_CHECK_LAUNCH("convert_to_bf16_kernel");
}

}  // namespace sextant::kernels
