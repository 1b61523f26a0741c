#include "kernels/moe_load_balancing.h"

#include <algorithm>
#include <string>

#include "kernels/column_partials.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/moe_router_math.cuh"

namespace sextant::kernels {
namespace {

using detail::kWarpSize;

// Statistics in two passes, both in a fixed order: each block sums one chunk of
// kChunkTokens tokens of one group for 32 experts into partials (chunks, groups x
// experts), then accumulate_column_partials adds the chunks in order. 32 tokens
// a chunk, 4 per token lane: a micro-batch of 2048 tokens over 128 experts is
// 256 blocks (with 256-token chunks it was 32 blocks on 132 SMs, each thread
// walking 32 tokens one after another: 34 us on an H100, by Nsight Compute,
// reports/measurements/2026-11-27-h100-moe-ncu/).
constexpr int kChunkTokens = 32;
constexpr int kTokenLanes = 8;  // threadIdx.y: tokens y, y + 8, ... of the chunk

int chunks_per_group(int group_tokens) { return (group_tokens + kChunkTokens - 1) / kChunkTokens; }

int resolved_group_tokens(int tokens, int group_tokens) { return group_tokens == 0 ? tokens : group_tokens; }

void check_groups(const char* launcher, int tokens, int group_tokens) {
  require_argument(group_tokens >= 0, launcher,
                   "group_tokens (" + std::to_string(group_tokens) + ") must be >= 0 (0: all tokens)");
  const int s = resolved_group_tokens(tokens, group_tokens);
  require_argument(tokens == 0 || (s > 0 && tokens % s == 0), launcher,
                   "group_tokens (" + std::to_string(group_tokens) + ") must divide tokens (" +
                       std::to_string(tokens) + ")");
  require_argument(tokens == 0 || (tokens / s <= 65535 && chunks_per_group(s) <= 65535), launcher,
                   "at most 65535 groups of at most 65535 x " + std::to_string(kChunkTokens) + " tokens");
}

// Block (32 experts, 8 token lanes); grid (expert blocks, groups, chunks).
__global__ void moe_aux_statistics_partials_kernel(float* prob_partials, float* count_partials,
                                                   const float* logits, const float* row_lse,
                                                   const float* row_score_sum,
                                                   const std::int32_t* topk_ids, int experts, int topk,
                                                   int group_tokens, bool sigmoid) {
  __shared__ float probs[kTokenLanes][kWarpSize];
  __shared__ float counts[kTokenLanes][kWarpSize];
  const int e = blockIdx.x * kWarpSize + threadIdx.x;
  const int g = blockIdx.y, chunk = blockIdx.z;
  const int begin = g * group_tokens + chunk * kChunkTokens;
  const int end = min(begin + kChunkTokens, (g + 1) * group_tokens);
  float p_sum = 0.0f, c_sum = 0.0f;
  if (e < experts) {
    for (int t = begin + threadIdx.y; t < end; t += kTokenLanes) {
      const float x = logits[static_cast<std::int64_t>(t) * experts + e];
      p_sum += sigmoid ? detail::sigmoid(x) / row_score_sum[t] : expf(x - row_lse[t]);
      const std::int32_t* ids = topk_ids + static_cast<std::int64_t>(t) * topk;
      for (int j = 0; j < topk; ++j) c_sum += ids[j] == e ? 1.0f : 0.0f;
    }
  }
  probs[threadIdx.y][threadIdx.x] = p_sum;
  counts[threadIdx.y][threadIdx.x] = c_sum;
  __syncthreads();
  if (threadIdx.y != 0 || e >= experts) return;
  float p_total = 0.0f, c_total = 0.0f;
#pragma unroll
  for (int y = 0; y < kTokenLanes; ++y) p_total += probs[y][threadIdx.x], c_total += counts[y][threadIdx.x];
  const std::int64_t at = static_cast<std::int64_t>(chunk) * gridDim.y * experts +
                          static_cast<std::int64_t>(g) * experts + e;
  prob_partials[at] = p_total;
  count_partials[at] = c_total;
}

constexpr int kLossThreads = 1024;

__global__ void __launch_bounds__(kLossThreads)
    moe_router_loss_values_kernel(float* aux_loss, float* z_loss, const float* prob_sums,
                                  const float* group_counts, const float* row_lse, int tokens,
                                  int group_cells, float aux_factor, float z_factor) {
  __shared__ float scratch[kLossThreads / kWarpSize];
  if (aux_loss != nullptr) {
    float sum = 0.0f;
    for (int i = threadIdx.x; i < group_cells; i += kLossThreads) sum += group_counts[i] * prob_sums[i];
    sum = detail::block_sum(sum, scratch);
    if (threadIdx.x == 0) *aux_loss = aux_factor * sum;
  }
  if (z_loss != nullptr) {
    float sum = 0.0f;
    for (int t = threadIdx.x; t < tokens; t += kLossThreads) sum += row_lse[t] * row_lse[t];
    sum = detail::block_sum(sum, scratch);
    if (threadIdx.x == 0) *z_loss = z_factor * sum;
  }
}

// One block, a thread per expert. sign(mean - load_i) = sign(sum - N load_i), in
// integers, so an expert at the mean is never nudged by rounding.
__global__ void moe_expert_bias_update_kernel(float* expert_bias, const std::int32_t* tokens_per_expert,
                                              int experts, float update_rate) {
  __shared__ long long scratch[kMoeMaxExperts / kWarpSize];
  const int i = threadIdx.x;
  const long long load = i < experts ? tokens_per_expert[i] : 0;
  const long long sum = detail::block_sum(load, scratch);
  if (i >= experts) return;
  const long long difference = sum - static_cast<long long>(experts) * load;
  expert_bias[i] += difference > 0 ? update_rate : difference < 0 ? -update_rate : 0.0f;
}

// The experts a per-expert launcher takes: 1 to kMoeMaxExperts, as the router.
void check_experts(const char* launcher, int experts) {
  require_argument(experts >= 1 && experts <= kMoeMaxExperts, launcher,
                   "experts (" + std::to_string(experts) + ") must be in [1, " + std::to_string(kMoeMaxExperts) +
                       "]");
}

__global__ void moe_accumulate_expert_load_kernel(std::int32_t* total, const std::int32_t* tokens_per_expert,
                                                  int experts) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < experts) total[i] += tokens_per_expert[i];
}

}  // namespace

std::size_t moe_aux_loss_statistics_workspace_bytes(int tokens, int experts, int group_tokens) {
  const int s = resolved_group_tokens(tokens, group_tokens);
  if (tokens <= 0 || s <= 0) return 0;
  const std::size_t cells = static_cast<std::size_t>(chunks_per_group(s)) * (tokens / s) * experts;
  const std::size_t one = (cells * sizeof(float) + 255) / 256 * 256;
  return 2 * one;
}

void moe_aux_loss_statistics(float* prob_sums, float* group_counts, const float* logits,
                             const float* row_lse, const float* row_score_sum,
                             const std::int32_t* topk_ids, int tokens, int experts,
                             const MoeRouterOptions& options, int group_tokens, void* workspace,
                             std::size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* kName = "moe_aux_loss_statistics";
  moe_router_check(kName, tokens, experts, options);
  check_groups(kName, tokens, group_tokens);
  if (tokens == 0) return;
  require_argument(prob_sums != nullptr && group_counts != nullptr && logits != nullptr &&
                       row_lse != nullptr && row_score_sum != nullptr && topk_ids != nullptr,
                   kName, "no pointer may be null");
  const std::size_t needed = moe_aux_loss_statistics_workspace_bytes(tokens, experts, group_tokens);
  require_argument(workspace_bytes >= needed && is_aligned(workspace, 16), kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) must be 16-byte aligned and hold " +
                       std::to_string(needed) + " bytes");
  const int s = resolved_group_tokens(tokens, group_tokens);
  const int groups = tokens / s, chunks = chunks_per_group(s);
  auto* prob_partials = static_cast<float*>(workspace);
  auto* count_partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + needed / 2);
  const dim3 grid((experts + kWarpSize - 1) / kWarpSize, groups, chunks);
  moe_aux_statistics_partials_kernel<<<grid, dim3(kWarpSize, kTokenLanes), 0, stream>>>(
      prob_partials, count_partials, logits, row_lse, row_score_sum, topk_ids, experts, options.topk, s,
      options.score_function == MoeScoreFunction::kSigmoid);
  SEXTANT_CHECK_LAUNCH("moe_aux_statistics_partials_kernel");
  const detail::ColumnSum sums[] = {{prob_partials, prob_sums}, {count_partials, group_counts}};
  detail::accumulate_column_partials(sums, 2, chunks, groups * experts, stream, /*accumulate=*/false);
}

void moe_router_loss_values(float* aux_loss, float* z_loss, const float* prob_sums,
                            const float* group_counts, const float* row_lse, int tokens, int experts,
                            int topk, const MoeRouterLossOptions& losses, cudaStream_t stream) {
  constexpr const char* kName = "moe_router_loss_values";
  MoeRouterOptions shape;
  shape.topk = topk;
  moe_router_check(kName, tokens, experts, shape);
  check_groups(kName, tokens, losses.aux_group_tokens);
  require_argument(aux_loss == nullptr || (prob_sums != nullptr && group_counts != nullptr), kName,
                   "the aux loss needs prob_sums and group_counts");
  require_argument(z_loss == nullptr || row_lse != nullptr, kName, "the z-loss needs row_lse");
  if (aux_loss == nullptr && z_loss == nullptr) return;
  if (tokens == 0) {  // no tokens, no loss
    if (aux_loss != nullptr) SEXTANT_CUDA_CHECK(cudaMemsetAsync(aux_loss, 0, sizeof(float), stream));
    if (z_loss != nullptr) SEXTANT_CUDA_CHECK(cudaMemsetAsync(z_loss, 0, sizeof(float), stream));
    return;
  }
  const int s = resolved_group_tokens(tokens, losses.aux_group_tokens);
  const int groups = tokens / s;
  // alpha N / G sum_g sum_i (count_gi / (k S)) (prob_sum_gi / S)
  const double aux_factor = static_cast<double>(losses.aux_loss_coeff) * experts /
                            (static_cast<double>(groups) * topk * static_cast<double>(s) * s);
  const double z_factor = static_cast<double>(losses.z_loss_coeff) / tokens;
  moe_router_loss_values_kernel<<<1, kLossThreads, 0, stream>>>(
      aux_loss, z_loss, prob_sums, group_counts, row_lse, tokens, groups * experts,
      static_cast<float>(aux_factor), static_cast<float>(z_factor));
  SEXTANT_CHECK_LAUNCH("moe_router_loss_values_kernel");
}

void moe_expert_bias_update(float* expert_bias, const std::int32_t* tokens_per_expert, int experts,
                            float update_rate, cudaStream_t stream) {
  constexpr const char* kName = "moe_expert_bias_update";
  check_experts(kName, experts);
  require_argument(expert_bias != nullptr && tokens_per_expert != nullptr, kName,
                   "expert_bias and tokens_per_expert must not be null");
  require_argument(update_rate >= 0.0f, kName, "update_rate must be >= 0");
  const int threads = (experts + kWarpSize - 1) / kWarpSize * kWarpSize;
  moe_expert_bias_update_kernel<<<1, threads, 0, stream>>>(expert_bias, tokens_per_expert, experts,
                                                           update_rate);
  SEXTANT_CHECK_LAUNCH("moe_expert_bias_update_kernel");
}

void moe_accumulate_expert_load(std::int32_t* total, const std::int32_t* tokens_per_expert, int experts,
                                cudaStream_t stream) {
  constexpr const char* kName = "moe_accumulate_expert_load";
  check_experts(kName, experts);
  require_argument(total != nullptr && tokens_per_expert != nullptr, kName,
                   "total and tokens_per_expert must not be null");
  constexpr int kThreads = 256;
  moe_accumulate_expert_load_kernel<<<(experts + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      total, tokens_per_expert, experts);
  SEXTANT_CHECK_LAUNCH("moe_accumulate_expert_load_kernel");
}

}  // namespace sextant::kernels
