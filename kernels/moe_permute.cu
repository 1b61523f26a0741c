#include "kernels/moe_permute.h"

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::kWarpSize;

constexpr int kThreads = 128;  // one block per token: 1024 columns per pass
constexpr int kPadBlocksPerExpert = 16;

__device__ __forceinline__ std::int64_t row_offset(std::int32_t row, int cols) {
  return static_cast<std::int64_t>(row) * cols;
}

__global__ void __launch_bounds__(kThreads)
    permute_forward_kernel(__nv_bfloat16* permuted, const __nv_bfloat16* x, const std::int32_t* token_rows,
                           int topk, int cols) {
  const int t = blockIdx.x;
  const std::int32_t* rows = token_rows + static_cast<std::int64_t>(t) * topk;
  for (int c = threadIdx.x * kBf16PerVector; c < cols; c += kThreads * kBf16PerVector) {
    const uint4 v = *reinterpret_cast<const uint4*>(x + row_offset(t, cols) + c);
    for (int j = 0; j < topk; ++j) {
      const std::int32_t r = rows[j];
      if (r >= 0) *reinterpret_cast<uint4*>(permuted + row_offset(r, cols) + c) = v;
    }
  }
}

// Sums the token's mapped rows of `source`, each times its weight (1 without
// weights), onto its row of `residual` when that is not null; rounds once.
__global__ void __launch_bounds__(kThreads)
    gather_sum_kernel(__nv_bfloat16* out, const __nv_bfloat16* source, const float* topk_weights,
                      const std::int32_t* token_rows, int topk, int cols, const __nv_bfloat16* residual) {
  const int t = blockIdx.x;
  const std::int32_t* rows = token_rows + static_cast<std::int64_t>(t) * topk;
  const float* weights = topk_weights != nullptr ? topk_weights + static_cast<std::int64_t>(t) * topk : nullptr;
  for (int c = threadIdx.x * kBf16PerVector; c < cols; c += kThreads * kBf16PerVector) {
    float sum[kBf16PerVector] = {};
    if (residual != nullptr) detail::load_bf16x8(residual + row_offset(t, cols) + c, sum);
    for (int j = 0; j < topk; ++j) {
      const std::int32_t r = rows[j];
      if (r < 0) continue;
      const float w = weights != nullptr ? weights[j] : 1.0f;
      float v[kBf16PerVector];
      detail::load_bf16x8(source + row_offset(r, cols) + c, v);
#pragma unroll
      for (int i = 0; i < kBf16PerVector; ++i) sum[i] += w * v[i];
    }
    detail::store_bf16x8(out + row_offset(t, cols) + c, sum);
  }
}

__global__ void __launch_bounds__(kThreads)
    unpermute_backward_kernel(__nv_bfloat16* dexpert_out, float* dtopk_weights, const __nv_bfloat16* dout,
                              const __nv_bfloat16* expert_out, const float* topk_weights,
                              const std::int32_t* token_rows, int topk, int cols) {
  __shared__ float scratch[kThreads / kWarpSize];
  const int t = blockIdx.x;
  const std::int64_t first_slot = static_cast<std::int64_t>(t) * topk;
  for (int j = 0; j < topk; ++j) {
    const std::int32_t r = token_rows[first_slot + j];  // the same for the whole block
    if (r < 0) {
      if (threadIdx.x == 0) dtopk_weights[first_slot + j] = 0.0f;
      continue;
    }
    const float w = topk_weights[first_slot + j];
    float dot = 0.0f;
    for (int c = threadIdx.x * kBf16PerVector; c < cols; c += kThreads * kBf16PerVector) {
      float g[kBf16PerVector], y[kBf16PerVector], d[kBf16PerVector];
      detail::load_bf16x8(dout + row_offset(t, cols) + c, g);
      detail::load_bf16x8(expert_out + row_offset(r, cols) + c, y);
#pragma unroll
      for (int i = 0; i < kBf16PerVector; ++i) {
        dot += g[i] * y[i];
        d[i] = w * g[i];
      }
      detail::store_bf16x8(dexpert_out + row_offset(r, cols) + c, d);
    }
    dot = detail::block_sum(dot, scratch);
    if (threadIdx.x == 0) dtopk_weights[first_slot + j] = dot;
  }
}

// The rows of expert e's block (MoePadding).
__device__ std::int64_t padded_block_rows(const std::int32_t* kept, int e, int capacity, int rows_multiple) {
  return capacity > 0 ? capacity : (kept[e] + rows_multiple - 1) / rows_multiple * rows_multiple;
}

// Grid (experts, kPadBlocksPerExpert): expert e's rows after its kept ones, to the
// end of its block.
__global__ void zero_padding_kernel(__nv_bfloat16* rows, const std::int32_t* kept_tokens_per_expert,
                                    int capacity, int rows_multiple, int cols) {
  const int e = blockIdx.x;
  // The blocks before e, summed by the whole block (a serial sum per thread took
  // 31 us at 128 experts).
  __shared__ std::int64_t scratch[kThreads / detail::kWarpSize];
  std::int64_t before = 0;
  for (int j = threadIdx.x; j < e; j += kThreads)
    before += padded_block_rows(kept_tokens_per_expert, j, capacity, rows_multiple);
  const std::int64_t start = detail::block_sum(before, scratch);
  const std::int64_t first = start + kept_tokens_per_expert[e];
  const std::int64_t end = start + padded_block_rows(kept_tokens_per_expert, e, capacity, rows_multiple);
  const std::int64_t vectors_per_row = cols / kBf16PerVector;
  const std::int64_t vectors = (end - first) * vectors_per_row;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto* out = reinterpret_cast<uint4*>(rows + first * cols);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x; i < vectors;
       i += static_cast<std::int64_t>(kPadBlocksPerExpert) * kThreads)
    out[i] = zero;
}

void check(const char* launcher, int tokens, int topk, int cols, const void* a, const void* b,
           const void* c) {
  require_argument(tokens >= 0 && topk >= 1, launcher,
                   "tokens (" + std::to_string(tokens) + ") must be >= 0 and topk (" +
                       std::to_string(topk) + ") >= 1");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, launcher,
                   "cols (" + std::to_string(cols) + ") must be a positive multiple of 8 (16-byte vectors)");
  require_argument(is_aligned(a, 16) && is_aligned(b, 16) && is_aligned(c, 16), launcher,
                   "bf16 rows must be 16-byte aligned");
}

void zero_padding(Bf16* rows, const MoePadding& padding, int cols, cudaStream_t stream) {
  if (padding.kept_tokens_per_expert == nullptr || padding.experts == 0) return;
  require_argument(padding.experts > 0 && padding.capacity >= 0 && padding.rows_multiple >= 1 &&
                       (padding.capacity > 0 || padding.rows_multiple > 1),
                   "moe permutation padding",
                   "needs experts > 0 and a capacity > 0 or a rows_multiple > 1");
  zero_padding_kernel<<<dim3(padding.experts, kPadBlocksPerExpert), kThreads, 0, stream>>>(
      detail::cuda_bf16(rows), padding.kept_tokens_per_expert, padding.capacity, padding.rows_multiple, cols);
  SEXTANT_CHECK_LAUNCH("zero_padding_kernel");
}

}  // namespace

void moe_permute_forward(Bf16* permuted, const Bf16* x, const std::int32_t* token_rows, int tokens,
                         int topk, int cols, const MoePadding& padding, cudaStream_t stream) {
  check("moe_permute_forward", tokens, topk, cols, permuted, x, nullptr);
  zero_padding(permuted, padding, cols, stream);
  if (tokens == 0) return;
  permute_forward_kernel<<<tokens, kThreads, 0, stream>>>(detail::cuda_bf16(permuted), detail::cuda_bf16(x),
                                                          token_rows, topk, cols);
  SEXTANT_CHECK_LAUNCH("permute_forward_kernel");
}

void moe_permute_backward(Bf16* dx, const Bf16* dpermuted, const std::int32_t* token_rows, int tokens,
                          int topk, int cols, cudaStream_t stream) {
  check("moe_permute_backward", tokens, topk, cols, dx, dpermuted, nullptr);
  if (tokens == 0) return;
  gather_sum_kernel<<<tokens, kThreads, 0, stream>>>(detail::cuda_bf16(dx), detail::cuda_bf16(dpermuted),
                                                     nullptr, token_rows, topk, cols, nullptr);
  SEXTANT_CHECK_LAUNCH("gather_sum_kernel<permute_backward>");
}

void moe_unpermute_forward(Bf16* out, const Bf16* expert_out, const float* topk_weights,
                           const std::int32_t* token_rows, int tokens, int topk, int cols,
                           cudaStream_t stream, const Bf16* residual) {
  check("moe_unpermute_forward", tokens, topk, cols, out, expert_out, nullptr);
  if (tokens == 0) return;
  require_argument(topk_weights != nullptr, "moe_unpermute_forward", "topk_weights must not be null");
  gather_sum_kernel<<<tokens, kThreads, 0, stream>>>(detail::cuda_bf16(out), detail::cuda_bf16(expert_out),
                                                     topk_weights, token_rows, topk, cols,
                                                     detail::cuda_bf16(residual));
  SEXTANT_CHECK_LAUNCH("gather_sum_kernel<unpermute_forward>");
}

void moe_unpermute_backward(Bf16* dexpert_out, float* dtopk_weights, const Bf16* dout,
                            const Bf16* expert_out, const float* topk_weights,
                            const std::int32_t* token_rows, int tokens, int topk, int cols,
                            const MoePadding& padding, cudaStream_t stream) {
  check("moe_unpermute_backward", tokens, topk, cols, dexpert_out, dout, expert_out);
  zero_padding(dexpert_out, padding, cols, stream);
  if (tokens == 0) return;
  require_argument(topk_weights != nullptr && dtopk_weights != nullptr, "moe_unpermute_backward",
                   "topk_weights and dtopk_weights must not be null");
  unpermute_backward_kernel<<<tokens, kThreads, 0, stream>>>(
      detail::cuda_bf16(dexpert_out), dtopk_weights, detail::cuda_bf16(dout), detail::cuda_bf16(expert_out),
      topk_weights, token_rows, topk, cols);
  SEXTANT_CHECK_LAUNCH("unpermute_backward_kernel");
}

}  // namespace sextant::kernels
