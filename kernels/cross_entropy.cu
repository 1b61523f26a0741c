#include "kernels/cross_entropy.h"

#include <cfloat>
#include <string>

#include "kernels/cp_async.cuh"
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

// The row's MaxSum from each thread's: warps by shuffles, then every thread
// combines the warps in the same order (so all agree bit for bit).
__device__ __forceinline__ MaxSum block_combine(MaxSum local, float* warp_max, float* warp_sum) {
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
  MaxSum total;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total = combine(total, MaxSum{warp_max[w], warp_sum[w]});
  return total;
}

// Folds 8 values into a running MaxSum (one rescale per vector).
__device__ __forceinline__ MaxSum accumulate(MaxSum local, const float (&v)[8]) {
  float m = local.max;
#pragma unroll
  for (int i = 0; i < 8; ++i) m = fmaxf(m, v[i]);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += expf(v[i] - m);
  return {m, local.sum * expf(local.max - m) + s};
}

// The gradient of 8 logits starting at column c.
__device__ __forceinline__ void softmax_gradient(float (&v)[8], int c, int target, const MaxSum& total,
                                                 float inv_sum, float grad_scale) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float p = expf(v[i] - total.max) * inv_sum;
    v[i] = (p - (c + i == target ? 1.0f : 0.0f)) * grad_scale;
  }
}

__device__ __forceinline__ void ignored_row(float* losses, __nv_bfloat16* dlogits, std::int64_t row,
                                            int vocab) {
  if (threadIdx.x == 0) losses[row] = 0.0f;
  if (dlogits == nullptr) return;
  const float zeros[8] = {};
  for (int c = threadIdx.x * kBf16PerVector; c < vocab; c += kThreads * kBf16PerVector)
    detail::store_bf16x8(dlogits + row * vocab + c, zeros);
}

// Rows that fit in shared memory (vocab x 2 bytes: 100 KiB for GPT-2's 51200,
// two blocks per H100 SM): the row is copied in once (cp.async, every thread's
// vectors in flight together), and both passes read it there, so the logits
// cross the memory bus once instead of twice (the two-pass kernel below).
__global__ void __launch_bounds__(kThreads)
    softmax_cross_entropy_staged_kernel(float* losses, __nv_bfloat16* dlogits,
                                        const __nv_bfloat16* logits, const std::int32_t* targets,
                                        int vocab, float grad_scale) {
  extern __shared__ uint4 staged[];  // the row, vocab / 8 vectors
  __shared__ float warp_max[kWarps];
  __shared__ float warp_sum[kWarps];
  const std::int64_t row = blockIdx.x;
  const int target = targets[row];
  if (target < 0) {  // ignored row: uniform across the block
    ignored_row(losses, dlogits, row, vocab);
    return;
  }
  const int vectors = vocab / kBf16PerVector;
  const uint4* x = reinterpret_cast<const uint4*>(logits + row * vocab);
  for (int j = threadIdx.x; j < vectors; j += kThreads) detail::cp_async_16(&staged[j], &x[j], true);
  detail::cp_async_commit();
  detail::cp_async_wait<0>();
  __syncthreads();

  MaxSum local;
  for (int j = threadIdx.x; j < vectors; j += kThreads) {
    float v[8];
    detail::unpack_bf16x8(staged[j], v);
    local = accumulate(local, v);
  }
  const MaxSum total = block_combine(local, warp_max, warp_sum);
  if (threadIdx.x == 0) {
    const float target_logit = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(staged)[target]);
    losses[row] = logf(total.sum) + total.max - target_logit;
  }
  if (dlogits == nullptr) return;
  const float inv_sum = 1.0f / total.sum;
  __nv_bfloat16* dx = dlogits + row * vocab;
  for (int j = threadIdx.x; j < vectors; j += kThreads) {
    float v[8];
    detail::unpack_bf16x8(staged[j], v);
    softmax_gradient(v, j * kBf16PerVector, target, total, inv_sum, grad_scale);
    detail::store_bf16x8(dx + j * kBf16PerVector, v);
  }
}

// Rows too wide for shared memory (Llama 3's 128256): read twice.
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
    ignored_row(losses, dlogits, row, vocab);
    return;
  }
  // Read before the barrier below, after which other threads may overwrite it (in place).
  const float target_logit = threadIdx.x == 0 ? __bfloat162float(x[target]) : 0.0f;

  MaxSum local;
  for (int c = threadIdx.x * kBf16PerVector; c < vocab; c += kThreads * kBf16PerVector) {
    float v[8];
    detail::load_bf16x8(x + c, v);
    local = accumulate(local, v);
  }
  const MaxSum total = block_combine(local, warp_max, warp_sum);

  if (threadIdx.x == 0) losses[row] = logf(total.sum) + total.max - target_logit;
  if (dlogits == nullptr) return;

  const float inv_sum = 1.0f / total.sum;
  __nv_bfloat16* dx = dlogits + row * vocab;
  for (int c = threadIdx.x * kBf16PerVector; c < vocab; c += kThreads * kBf16PerVector) {
    float v[8];
    detail::load_bf16x8(x + c, v);
    softmax_gradient(v, c, target, total, inv_sum, grad_scale);
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
  int device = 0, max_shared = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const std::size_t row_bytes = static_cast<std::size_t>(vocab) * sizeof(Bf16);
  // Room for the kernel's static shared memory (the per-warp partials) too.
  if (row_bytes + 1024 <= static_cast<std::size_t>(max_shared)) {
    SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(softmax_cross_entropy_staged_kernel,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(row_bytes)));
    softmax_cross_entropy_staged_kernel<<<rows, kThreads, row_bytes, stream>>>(
        losses, detail::cuda_bf16(dlogits), detail::cuda_bf16(logits), targets, vocab, grad_scale);
    SEXTANT_CHECK_LAUNCH("softmax_cross_entropy_staged_kernel");
    return;
  }
  softmax_cross_entropy_kernel<<<rows, kThreads, 0, stream>>>(
      losses, detail::cuda_bf16(dlogits), detail::cuda_bf16(logits), targets, vocab, grad_scale);
  SEXTANT_CHECK_LAUNCH("softmax_cross_entropy_kernel");
}

}  // namespace sextant::kernels
