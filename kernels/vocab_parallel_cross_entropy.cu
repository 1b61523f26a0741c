#include "kernels/vocab_parallel_cross_entropy.h"

#include <cfloat>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kWarpSize;

constexpr int kThreads = 256;  // one block per row
constexpr int kWarps = kThreads / kWarpSize;

__device__ __forceinline__ float block_max(float value, float* scratch) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __syncthreads();
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = value;
  __syncthreads();
  float m = -FLT_MAX;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

__global__ void row_max_kernel(float* row_max, const __nv_bfloat16* logits, int vocab) {
  __shared__ float scratch[kWarps];
  const __nv_bfloat16* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  float m = -FLT_MAX;
  for (int j = threadIdx.x; j < vocab; j += kThreads) m = fmaxf(m, __bfloat162float(row[j]));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void partials_kernel(float* partials, float* max_out, const float* gathered_max, int ranks,
                                const __nv_bfloat16* logits, const std::int32_t* targets, int rows,
                                int vocab, int vocab_start) {
  __shared__ float scratch[kWarps];
  const int r = blockIdx.x;
  float m = -FLT_MAX;
  for (int k = 0; k < ranks; ++k) m = fmaxf(m, gathered_max[static_cast<std::int64_t>(k) * rows + r]);
  const __nv_bfloat16* row = logits + static_cast<std::int64_t>(r) * vocab;
  float s = 0.0f;
  for (int j = threadIdx.x; j < vocab; j += kThreads) s += expf(__bfloat162float(row[j]) - m);
  s = detail::block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const int local = targets[r] - vocab_start;
    const bool owned = targets[r] >= 0 && local >= 0 && local < vocab;
    partials[r] = s;
    partials[rows + r] = owned ? __bfloat162float(row[local]) : 0.0f;
    max_out[r] = m;
  }
}

__global__ void loss_and_gradient_kernel(float* losses, __nv_bfloat16* dlogits,
                                         const __nv_bfloat16* logits, const float* partials,
                                         const float* max, const std::int32_t* targets, int rows,
                                         int vocab, int vocab_start, float grad_scale) {
  const int r = blockIdx.x;
  const std::int32_t target = targets[r];
  const float m = max[r];
  const float sum = partials[r];
  const std::int64_t base = static_cast<std::int64_t>(r) * vocab;
  if (threadIdx.x == 0 && losses != nullptr)
    losses[r] = target < 0 ? 0.0f : logf(sum) + m - partials[rows + r];
  if (dlogits == nullptr) return;
  const float inverse = 1.0f / sum;
  const int local = target - vocab_start;
  for (int j = threadIdx.x; j < vocab; j += kThreads) {
    float g = 0.0f;
    if (target >= 0) {
      g = expf(__bfloat162float(logits[base + j]) - m) * inverse;
      if (j == local) g -= 1.0f;
      g *= grad_scale;
    }
    dlogits[base + j] = __float2bfloat16(g);
  }
}

void check(const char* name, int rows, int vocab) {
  require_argument(rows >= 0 && vocab > 0, name,
                   "rows (" + std::to_string(rows) + ") must be >= 0 and vocab (" +
                       std::to_string(vocab) + ") > 0");
}

}  // namespace

void vocab_parallel_row_max(float* row_max, const Bf16* logits, int rows, int vocab,
                            cudaStream_t stream) {
  check("vocab_parallel_row_max", rows, vocab);
  if (rows == 0) return;
  row_max_kernel<<<rows, kThreads, 0, stream>>>(row_max, detail::cuda_bf16(logits), vocab);
  SEXTANT_CHECK_LAUNCH("vocab_parallel_row_max_kernel");
}

void vocab_parallel_partials(float* partials, float* max, const float* gathered_max, int ranks,
                             const Bf16* logits, const std::int32_t* targets, int rows, int vocab,
                             int vocab_start, cudaStream_t stream) {
  check("vocab_parallel_partials", rows, vocab);
  require_argument(ranks >= 1, "vocab_parallel_partials", "ranks must be >= 1");
  if (rows == 0) return;
  partials_kernel<<<rows, kThreads, 0, stream>>>(partials, max, gathered_max, ranks,
                                                 detail::cuda_bf16(logits), targets, rows, vocab,
                                                 vocab_start);
  SEXTANT_CHECK_LAUNCH("vocab_parallel_partials_kernel");
}

void vocab_parallel_loss_and_gradient(float* losses, Bf16* dlogits, const Bf16* logits,
                                      const float* partials, const float* max,
                                      const std::int32_t* targets, int rows, int vocab,
                                      int vocab_start, float grad_scale, cudaStream_t stream) {
  check("vocab_parallel_loss_and_gradient", rows, vocab);
  if (rows == 0) return;
  loss_and_gradient_kernel<<<rows, kThreads, 0, stream>>>(
      losses, detail::cuda_bf16(dlogits), detail::cuda_bf16(logits), partials, max, targets, rows,
      vocab, vocab_start, grad_scale);
  SEXTANT_CHECK_LAUNCH("vocab_parallel_loss_and_gradient_kernel");
}

}  // namespace sextant::kernels
