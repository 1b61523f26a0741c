// Gradients of the router's weights with respect to the logits x of one token,
// g_j = dL/dw_j for the k selected experts c_j, c the scaling factor:
// - softmax, renormalised: w_j = c q_j, q = softmax(x_c) over the selected, so
//   dL/dx_{c_j} = c q_j (g_j - sum_l q_l g_l), and 0 for the others.
// - softmax, plain: w_j = c p_{c_j}, p = softmax(x), so dL/dx_i = p_i (G_i - sum_j w_j g_j)
//   with G_i = c g_j where i = c_j, else 0.
// - sigmoid, normalised: w_j = c s_j / D, D = sum_l s_l + eps, so dL/ds_{c_j} =
//   (c / D) (g_j - sum_l g_l s_l / D); plain: c g_j. Then dL/dx = dL/ds s (1 - s).
// The aux loss adds dL/dp_i = a_i (constant counts): softmax p_i (a_i - sum_l p_l a_l);
// sigmoid, p_i = s_i / S (S = sum over all experts): (a_i - sum_l p_l a_l) / S s_i (1 - s_i).
// The z-loss adds (2 c_z / T) lse p_i. The test checks all of these against
// central differences of the forward, not against these formulas.
#include "kernels/moe_router.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/moe_router_math.cuh"

namespace sextant::kernels {
namespace {

using detail::kWarpSize;
using detail::warp_sum;

constexpr int kTokensPerBlock = 4;  // the backward: one warp per token
constexpr int kThreads = kTokensPerBlock * kWarpSize;
// The forward: 8 warps per block (its shared counts serve 8 tokens at a time),
// at most kForwardBlocksPerSm blocks per SM, the warps striding over the tokens
// beyond (fewer blocks, fewer atomics on the E global counts).
constexpr int kForwardTokensPerBlock = 8;
constexpr int kForwardThreads = kForwardTokensPerBlock * kWarpSize;
constexpr int kForwardBlocksPerSm = 4;

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// A selection score as an unsigned key that orders as the score does, so a
// warp's argmax is two integer reductions (__reduce_max_sync, then the lowest
// index holding the maximum). -0 and +0 tie, as they compare equal; NaN and -inf
// get 0, "nothing": the scalar argmax this replaces started from -inf and took
// only scores above it, so neither could win there either.
__device__ __forceinline__ std::uint32_t selection_key(float score) {
  if (!(score > -INFINITY)) return 0;
  const std::uint32_t bits = __float_as_uint(score == 0.0f ? 0.0f : score);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;  // negatives reversed, below positives
}

template <int kPerLane>
__global__ void __launch_bounds__(kForwardThreads)
    moe_router_forward_kernel(std::int32_t* topk_ids, float* topk_weights, float* row_lse,
                              float* row_score_sum, std::int32_t* tokens_per_expert,
                              const float* logits, const float* expert_bias, int tokens, int experts,
                              int topk, bool sigmoid, bool normalize, float scaling_factor) {
  __shared__ std::int32_t block_counts[kMoeMaxExperts];
  for (int e = threadIdx.x; e < experts; e += kForwardThreads) block_counts[e] = 0;
  __syncthreads();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Whole warps stride over the tokens, so no lane leaves the warp's collectives.
  for (int t = blockIdx.x * kForwardTokensPerBlock + warp; t < tokens; t += gridDim.x * kForwardTokensPerBlock) {
    const float* x = logits + static_cast<std::int64_t>(t) * experts;
    float value[kPerLane];
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      const int i = lane + q * kWarpSize;
      value[q] = i < experts ? x[i] : -INFINITY;
    }
    float m = -INFINITY;
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) m = fmaxf(m, value[q]);
    m = warp_max(m);
    float exp_sum = 0.0f, score_sum = 0.0f;
    std::uint32_t key[kPerLane];
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      const int i = lane + q * kWarpSize;
      key[q] = 0;
      if (i >= experts) continue;
      const float v = value[q];
      exp_sum += expf(v - m);
      if (sigmoid) {
        const float s = detail::sigmoid(v);
        score_sum += s;
        key[q] = selection_key(expert_bias != nullptr ? s + expert_bias[i] : s);
      } else {
        key[q] = selection_key(v);  // softmax is monotone: the largest logits are the largest probabilities
      }
    }
    exp_sum = warp_sum(exp_sum);
    score_sum = warp_sum(score_sum);
    const float lse = m + logf(exp_sum);

    int choice = 0;
    for (int j = 0; j < topk; ++j) {
      std::uint32_t best = 0;
      int best_index = INT_MAX;
#pragma unroll
      for (int q = 0; q < kPerLane; ++q)
        if (key[q] > best) best = key[q], best_index = lane + q * kWarpSize;  // index rises: ties keep the lower
      const std::uint32_t top = __reduce_max_sync(0xffffffffu, best);
      int index = __reduce_min_sync(0xffffffffu, top != 0 && best == top ? best_index : INT_MAX);
      // Only NaN scores (non-finite logits, a broken precondition) leave nothing
      // chosen; pick index j, so later kernels still index inside the experts.
      if (top == 0) index = j;
      if (lane == j) choice = index;
#pragma unroll
      for (int q = 0; q < kPerLane; ++q)
        if (lane + q * kWarpSize == index) key[q] = 0;  // taken
    }

    const bool selected = lane < topk;
    const float chosen_logit = selected ? x[choice] : 0.0f;
    float weight = 0.0f;
    if (sigmoid) {
      const float s = detail::sigmoid(chosen_logit);
      const float denominator = warp_sum(selected ? s : 0.0f) + detail::kSigmoidNormEpsilon;
      weight = normalize ? s / denominator : s;
    } else if (normalize) {
      // softmax of the selected logits; the largest is m (round 0 took the row's maximum).
      const float e = selected ? expf(chosen_logit - m) : 0.0f;
      weight = e / warp_sum(e);
    } else {
      weight = expf(chosen_logit - lse);
    }
    if (selected) {
      const std::int64_t slot = static_cast<std::int64_t>(t) * topk + lane;
      topk_ids[slot] = choice;
      topk_weights[slot] = scaling_factor * weight;
      atomicAdd(&block_counts[choice], 1);  // integers: the total is exact in any order
    }
    if (lane == 0) {
      row_lse[t] = lse;
      row_score_sum[t] = sigmoid ? score_sum : 1.0f;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += kForwardThreads)
    if (block_counts[e] != 0) atomicAdd(&tokens_per_expert[e], block_counts[e]);
}

// Backward, one warp per token: the dense terms (aux loss, z-loss, and the
// unnormalised softmax's shared term) for every expert, then the selected
// experts' own terms added one lane after another (deterministic even if a
// broken selection repeats an expert).
__global__ void __launch_bounds__(kThreads)
    moe_router_backward_kernel(float* dlogits, const float* logits, const std::int32_t* topk_ids,
                               const float* d_topk_weights, const float* aux_group_counts,
                               int tokens, int experts, int topk, bool sigmoid, bool normalize,
                               float scaling_factor, int aux_group_tokens, float aux_grad_per_count,
                               float z_grad_per_lse) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int t = blockIdx.x * kTokensPerBlock + warp;
  if (t >= tokens) return;
  const float* x = logits + static_cast<std::int64_t>(t) * experts;
  float* dx = dlogits + static_cast<std::int64_t>(t) * experts;

  float m = -INFINITY;
  for (int i = lane; i < experts; i += kWarpSize) m = fmaxf(m, x[i]);
  m = warp_max(m);
  float exp_sum = 0.0f, score_sum = 0.0f;
  for (int i = lane; i < experts; i += kWarpSize) {
    exp_sum += expf(x[i] - m);
    if (sigmoid) score_sum += detail::sigmoid(x[i]);
  }
  const float lse = m + logf(warp_sum(exp_sum));
  score_sum = warp_sum(score_sum);

  // The selected experts' terms (lane j: the j-th choice); derivations at the top of this file.
  const bool selected = lane < topk;
  const std::int64_t slot = static_cast<std::int64_t>(t) * topk + lane;
  const int choice = selected ? topk_ids[slot] : 0;
  const float g = selected && d_topk_weights != nullptr ? d_topk_weights[slot] : 0.0f;
  const float chosen_logit = selected ? x[choice] : 0.0f;
  float own = 0.0f;          // added to dx[choice]
  float shared_weighted = 0.0f;  // unnormalised softmax: - p_i * sum_j w_j g_j on every expert
  if (sigmoid) {
    const float s = detail::sigmoid(chosen_logit);
    float ds = scaling_factor * g;  // d/ds_j
    if (normalize) {
      const float denominator = warp_sum(selected ? s : 0.0f) + detail::kSigmoidNormEpsilon;
      const float dot = warp_sum(selected ? g * s / denominator : 0.0f);
      ds = scaling_factor / denominator * (g - dot);
    }
    own = ds * s * (1.0f - s);
  } else if (normalize) {
    const float top = warp_max(selected ? chosen_logit : -INFINITY);
    const float e = selected ? expf(chosen_logit - top) : 0.0f;
    const float q = e / warp_sum(e);
    const float dot = warp_sum(selected ? q * g : 0.0f);
    own = scaling_factor * q * (g - dot);
  } else {
    const float w = scaling_factor * expf(chosen_logit - lse);
    own = w * g;
    shared_weighted = warp_sum(selected ? w * g : 0.0f);
  }

  // Aux loss: d/dp_ti = aux_grad_per_count * count[group, i]; p is the softmax, or
  // for sigmoid the scores over their sum.
  const float* counts = aux_grad_per_count != 0.0f
                            ? aux_group_counts + static_cast<std::int64_t>(t / aux_group_tokens) * experts
                            : nullptr;
  float aux_dot = 0.0f;  // sum_i p_i * a_i
  if (counts != nullptr) {
    for (int i = lane; i < experts; i += kWarpSize) {
      const float p = sigmoid ? detail::sigmoid(x[i]) / score_sum : expf(x[i] - lse);
      aux_dot += p * aux_grad_per_count * counts[i];
    }
    aux_dot = warp_sum(aux_dot);
  }
  const float z_grad = z_grad_per_lse * lse;  // d/dx_ti of c (1/T) lse_t^2 = c (2/T) lse_t p_ti
  for (int i = lane; i < experts; i += kWarpSize) {
    const float p = expf(x[i] - lse);
    float d = z_grad * p - p * shared_weighted;
    if (counts != nullptr) {
      const float a = aux_grad_per_count * counts[i];
      if (sigmoid) {
        const float s = detail::sigmoid(x[i]);
        d += (a - aux_dot) / score_sum * s * (1.0f - s);
      } else {
        d += p * (a - aux_dot);
      }
    }
    dx[i] = d;
  }
  __syncwarp();
  for (int j = 0; j < topk; ++j) {
    if (lane == j) dx[choice] += own;
    __syncwarp();
  }
}

}  // namespace

void moe_router_check(const char* launcher, int tokens, int experts, const MoeRouterOptions& options) {
  require_argument(tokens >= 0, launcher, "tokens (" + std::to_string(tokens) + ") must be >= 0");
  require_argument(experts >= 1 && experts <= kMoeMaxExperts, launcher,
                   "experts (" + std::to_string(experts) + ") must be in [1, " +
                       std::to_string(kMoeMaxExperts) + "]");
  require_argument(options.topk >= 1 && options.topk <= experts && options.topk <= kMoeMaxTopk,
                   launcher,
                   "topk (" + std::to_string(options.topk) + ") must be in [1, min(experts (" +
                       std::to_string(experts) + "), " + std::to_string(kMoeMaxTopk) + ")]");
  require_argument(options.scaling_factor > 0.0f && std::isfinite(options.scaling_factor), launcher,
                   "scaling_factor (" + std::to_string(options.scaling_factor) +
                       ") must be positive and finite");
}

void moe_router_forward(std::int32_t* topk_ids, float* topk_weights, float* row_lse,
                        float* row_score_sum, std::int32_t* tokens_per_expert, const float* logits,
                        const float* expert_bias, int tokens, int experts,
                        const MoeRouterOptions& options, cudaStream_t stream) {
  constexpr const char* kName = "moe_router_forward";
  moe_router_check(kName, tokens, experts, options);
  const bool sigmoid = options.score_function == MoeScoreFunction::kSigmoid;
  require_argument(sigmoid || expert_bias == nullptr, kName,
                   "an expert bias is for the sigmoid router only (DeepSeek-V3); softmax takes none");
  require_argument(tokens_per_expert != nullptr, kName, "tokens_per_expert must not be null");
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(tokens_per_expert, 0, sizeof(std::int32_t) * experts, stream));
  if (tokens == 0) return;
  require_argument(topk_ids != nullptr && topk_weights != nullptr && row_lse != nullptr &&
                       row_score_sum != nullptr && logits != nullptr,
                   kName, "topk_ids, topk_weights, row_lse, row_score_sum and logits must not be null");
  int device = 0, sms = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(
      (tokens + kForwardTokensPerBlock - 1) / kForwardTokensPerBlock,
      static_cast<std::int64_t>(sms) * kForwardBlocksPerSm));
  // The logits per lane, a power of two (kMoeMaxExperts = 1024 is 32 per lane).
  static_assert(kMoeMaxExperts <= 32 * kWarpSize);
  const int per_lane = (experts + kWarpSize - 1) / kWarpSize;
  const auto kernel = per_lane <= 1    ? moe_router_forward_kernel<1>
                      : per_lane <= 2  ? moe_router_forward_kernel<2>
                      : per_lane <= 4  ? moe_router_forward_kernel<4>
                      : per_lane <= 8  ? moe_router_forward_kernel<8>
                      : per_lane <= 16 ? moe_router_forward_kernel<16>
                                       : moe_router_forward_kernel<32>;
  kernel<<<blocks, kForwardThreads, 0, stream>>>(topk_ids, topk_weights, row_lse, row_score_sum, tokens_per_expert,
                                                 logits, expert_bias, tokens, experts, options.topk, sigmoid,
                                                 options.normalize_topk, options.scaling_factor);
  SEXTANT_CHECK_LAUNCH("moe_router_forward_kernel");
}

void moe_router_backward(float* dlogits, const float* logits, const std::int32_t* topk_ids,
                         const float* d_topk_weights, const float* aux_group_counts, int tokens,
                         int experts, const MoeRouterOptions& options,
                         const MoeRouterLossOptions& losses, float loss_grad_scale,
                         cudaStream_t stream) {
  constexpr const char* kName = "moe_router_backward";
  moe_router_check(kName, tokens, experts, options);
  if (tokens == 0) return;
  require_argument(dlogits != nullptr && logits != nullptr && topk_ids != nullptr, kName,
                   "dlogits, logits and topk_ids must not be null");
  const int group_tokens = losses.aux_group_tokens == 0 ? tokens : losses.aux_group_tokens;
  const bool aux = losses.aux_loss_coeff != 0.0f;
  if (aux) {
    require_argument(group_tokens > 0 && tokens % group_tokens == 0, kName,
                     "aux_group_tokens (" + std::to_string(losses.aux_group_tokens) +
                         ") must divide tokens (" + std::to_string(tokens) + ")");
    require_argument(aux_group_counts != nullptr, kName, "the aux loss needs aux_group_counts");
  }
  // Switch loss per group g of S tokens, averaged over the G groups (moe_load_balancing.h):
  //   alpha N / G sum_g sum_i f_gi P_gi,  f_gi = count_gi / (k S),  P_gi = (1/S) sum_{t in g} p_ti
  // so d/dp_ti = alpha N count_gi / (G k S^2).
  const double groups = static_cast<double>(tokens) / group_tokens;
  const double aux_grad_per_count =
      aux ? static_cast<double>(loss_grad_scale) * losses.aux_loss_coeff * experts /
                (groups * options.topk * static_cast<double>(group_tokens) * group_tokens)
          : 0.0;
  // z-loss c (1/T) sum_t lse_t^2 (ST-MoE eq. 5): d/dlse_t = 2 c lse_t / T.
  const double z_grad_per_lse = static_cast<double>(loss_grad_scale) * losses.z_loss_coeff * 2.0 / tokens;
  moe_router_backward_kernel<<<(tokens + kTokensPerBlock - 1) / kTokensPerBlock, kThreads, 0, stream>>>(
      dlogits, logits, topk_ids, d_topk_weights, aux_group_counts, tokens, experts, options.topk,
      options.score_function == MoeScoreFunction::kSigmoid, options.normalize_topk,
      options.scaling_factor, group_tokens, static_cast<float>(aux_grad_per_count),
      static_cast<float>(z_grad_per_lse));
  SEXTANT_CHECK_LAUNCH("moe_router_backward_kernel");
}

}  // namespace sextant::kernels
