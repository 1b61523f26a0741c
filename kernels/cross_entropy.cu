#include "kernels/cross_entropy.h"

#include <cfloat>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::kWarpSize;

constexpr int kThreads = 512;  // one block per row; 50k-entry rows give each thread ~12 vectors
constexpr int kWarps = kThreads / kWarpSize;

// A running softmax denominator: sum of exp(x - max) over the values seen.
// -FLT_MAX rather than -inf as the empty max keeps exp(max_a - max) finite.
struct MaxSum {
  float max = -FLT_MAX;
  float sum = 0.0f;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__global__ void __launch_bounds__(kThreads)
    softmax_cross_entropy_kernel(float* losses, __nv_bfloat16* dlogits,
                                 const __nv_bfloat16* logits, const std::int32_t* targets,
                                 int vocab, float grad_scale) {
  __shared__ float warp_max[kWarps];
  __shared__ float warp_sum[kWarps];
  const std::int64_t row = blockIdx.x;
  const __nv_bfloat16* x = logits + row * vocab;
  const int target = targets[row];

  if (target < 0) {  // ignored row: uniform across the block
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (dlogits != nullptr) {
      const float zeros[8] = {};
      for (int c = threadIdx.x * kBf16PerVector; c < vocab; c += kThreads * kBf16PerVector)
        detail::store_bf16x8(dlogits + row * vocab + c, zeros);
    }
    return;
  }
  // Read before the barrier below, after which other threads may overwrite it (in place).
  const float target_logit = threadIdx.x == 0 ? __bfloat162float(x[target]) : 0.0f;

  MaxSum local;
  for (int c = threadIdx.x * kBf16PerVector; c < vocab; c += kThreads * kBf16PerVector) {
    float v[8];
    detail::load_bf16x8(x + c, v);
    float m = local.max;
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, v[i]);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) s += expf(v[i] - m);
    local = {m, local.sum * expf(local.max - m) + s};
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    MaxSum other;
    other.max = __shfl_xor_sync(0xffffffffu, local.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, local.sum, offset);
    local = combine(local, other);
  }
  if (threadIdx.x % kWarpSize == 0) {
    warp_max[threadIdx.x / kWarpSize] = local.max;
    warp_sum[threadIdx.x / kWarpSize] = local.sum;
  }
  __syncthreads();
  MaxSum total;  // every thread combines the warps in the same order
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total = combine(total, MaxSum{warp_max[w], warp_sum[w]});

  if (threadIdx.x == 0) losses[row] = logf(total.sum) + total.max - target_logit;
  if (dlogits == nullptr) return;

  const float inv_sum = 1.0f / total.sum;
  __nv_bfloat16* dx = dlogits + row * vocab;
  for (int c = threadIdx.x * kBf16PerVector; c < vocab; c += kThreads * kBf16PerVector) {
    float v[8];
    detail::load_bf16x8(x + c, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float p = expf(v[i] - total.max) * inv_sum;
      v[i] = (p - (c + i == target ? 1.0f : 0.0f)) * grad_scale;
    }
    detail::store_bf16x8(dx + c, v);
  }
}

}  // namespace

void softmax_cross_entropy(float* losses, Bf16* dlogits, const Bf16* logits,
                           const std::int32_t* targets, int rows, int vocab, float grad_scale,
                           cudaStream_t stream) {
  constexpr const char* kName = "softmax_cross_entropy";
  require_argument(rows >= 0, kName, "rows (" + std::to_string(rows) + ") must be >= 0");
  require_argument(vocab > 0 && vocab % kBf16PerVector == 0, kName,
                   "vocab (" + std::to_string(vocab) +
                       ") must be a positive multiple of 8; pad the vocabulary");
  require_argument(is_aligned(logits, 16) && is_aligned(dlogits, 16), kName,
                   "logits and dlogits must be 16-byte aligned");
  require_argument(losses != nullptr && targets != nullptr, kName,
                   "losses and targets must not be null");
  if (rows == 0) return;
  softmax_cross_entropy_kernel<<<rows, kThreads, 0, stream>>>(
      losses, detail::cuda_bf16(dlogits), detail::cuda_bf16(logits), targets, vocab, grad_scale);
  SEXTANT_CHECK_LAUNCH("softmax_cross_entropy_kernel");
}

}  // namespace sextant::kernels
