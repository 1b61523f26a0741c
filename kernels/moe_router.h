// The Mixture-of-Experts router after its linear layer: from the logits
// (tokens, experts) to each token's top-k experts and their weights, and the
// gradient back to the logits. fp32 throughout, as Megatron-Core keeps its
// router (--moe-router-dtype fp32). The logits' GEMM (x . Wr) is done elsewhere.
//
// Two score functions, as Megatron-Core's topk_softmax_with_capacity offers them:
// - softmax (Shazeer et al. 2017; Switch, Fedus et al. 2021; Mixtral): p = softmax(x)
//   over all experts, the k largest selected. With normalize_topk the weights are
//   renormalised over the k selected, w_j = p_j / sum_l p_l, which is the softmax of
//   the k selected logits: Megatron's default (softmax after top-k); without it they
//   are the plain probabilities (Megatron's --moe-router-pre-softmax).
// - sigmoid with a per-expert bias used only for selection (DeepSeek-V3,
//   arXiv:2412.19437, Sec. 2.1.2 eqs. 13-16, auxiliary-loss-free balancing): s =
//   sigmoid(x), the k largest s_i + b_i selected, w_j = s_j / (sum_l s_l + 1e-20)
//   with normalize_topk (eq. 13; the 1e-20 as Megatron), else w_j = s_j. The bias
//   never reaches the weights or the gradient.
// Both then multiply by scaling_factor (Megatron's --moe-router-topk-scaling-factor;
// DeepSeek-V3's routed scaling factor 2.5).
//
// Ties between equal selection scores go to the lower expert index, so the choice
// is deterministic. The backward recomputes what it needs from the logits (one
// warp per token reads a row of `experts` floats), so the forward saves only the
// per-token statistics the load-balancing losses need.
//
// Also here: the options of the two router losses, whose gradients the backward
// adds (their values and the bias update are in kernels/moe_load_balancing.h).
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace sextant::kernels {

/// Largest expert count the MoE kernels take: the router keeps a row of scores per
/// token in shared memory and the routing map scans the experts in one block.
/// (DeepSeek-V3 has 256 routed experts; Qwen3-MoE 128.)
inline constexpr int kMoeMaxExperts = 1024;
/// Largest top-k: one lane of a warp per selected expert.
inline constexpr int kMoeMaxTopk = 32;

enum class MoeScoreFunction { kSoftmax, kSigmoid };

struct MoeRouterOptions {
  int topk = 2;  // 1 <= topk <= min(experts, kMoeMaxTopk)
  MoeScoreFunction score_function = MoeScoreFunction::kSoftmax;
  /// Weights divided by their sum over the selected experts (see above). Megatron
  /// does this for softmax by default; for sigmoid it does it when topk > 1.
  bool normalize_topk = true;
  /// Multiplies every weight (> 0).
  float scaling_factor = 1.0f;
};

/// The router's two losses, whose gradients moe_router_backward adds.
struct MoeRouterLossOptions {
  /// alpha of the Switch load-balancing loss alpha * N * sum_i f_i * P_i (Fedus et
  /// al. 2021, eq. 4); 0 turns it off. Megatron's --moe-aux-loss-coeff (e.g. 1e-2).
  float aux_loss_coeff = 0.0f;
  /// Tokens per balancing group: the loss is taken over each run of this many
  /// consecutive tokens and averaged over the runs. The token count (one loss over
  /// the micro-batch, Megatron's aux_loss) or the sequence length (Megatron's
  /// seq_aux_loss, DeepSeek-V3 eq. 17-20: with tokens in (batch, sequence) order, as
  /// the engine lays them out, a sequence is a run); 0 means the token count.
  int aux_group_tokens = 0;
  /// The router z-loss coefficient (ST-MoE, Zoph et al. 2022, eq. 5:
  /// (1/B) sum_t (log sum_i exp x_ti)^2); 0 turns it off. Megatron's
  /// --moe-z-loss-coeff (ST-MoE uses 1e-3).
  float z_loss_coeff = 0.0f;
};

/// Checks options against a shape; throws KernelArgumentError naming the launcher.
void moe_router_check(const char* launcher, int tokens, int experts, const MoeRouterOptions& options);

/// Forward, one warp per token.
///   logits: (tokens, experts) fp32, finite.
///   expert_bias: (experts) fp32 selection bias for the sigmoid router, or null
///     (no bias); must be null for softmax.
///   topk_ids: (tokens, topk) int32, written: the selected experts, by descending
///     selection score (ties: lower index first).
///   topk_weights: (tokens, topk) fp32, written: their weights (see the file comment).
///   row_lse: (tokens) fp32, written: log sum_i exp(logits[t, i]), for the z-loss.
///   row_score_sum: (tokens) fp32, written: sum_i sigmoid(logits[t, i]) for the
///     sigmoid router (its balancing probabilities are the scores over this sum,
///     Megatron's and DeepSeek-V3 eq. 19), 1 for softmax.
///   tokens_per_expert: (experts) int32, written (zeroed first): how many tokens
///     selected each expert.
void moe_router_forward(std::int32_t* topk_ids, float* topk_weights, float* row_lse,
                        float* row_score_sum, std::int32_t* tokens_per_expert, const float* logits,
                        const float* expert_bias, int tokens, int experts,
                        const MoeRouterOptions& options, cudaStream_t stream);

/// Backward: dlogits (tokens, experts) fp32, written, = the gradient of
///   sum_{t,j} d_topk_weights[t, j] * topk_weights[t, j]
///   + loss_grad_scale * (aux loss + z-loss)
/// with respect to the logits, the selection (topk_ids) and the counts held fixed
/// (they are not differentiable; the Switch loss's f_i is a constant, eq. 4).
///   topk_ids: as the forward wrote them. d_topk_weights: (tokens, topk) fp32, or
///     null (no gradient from the weights).
///   aux_group_counts: (tokens / aux_group_tokens, experts) fp32: how many tokens of
///     each balancing group selected each expert, as moe_aux_loss_statistics writes
///     them (or their sum over ranks); read only when losses.aux_loss_coeff != 0.
///   loss_grad_scale: d(total loss) / d(each router loss), e.g. 1 / micro-batches.
void moe_router_backward(float* dlogits, const float* logits, const std::int32_t* topk_ids,
                         const float* d_topk_weights, const float* aux_group_counts, int tokens,
                         int experts, const MoeRouterOptions& options,
                         const MoeRouterLossOptions& losses, float loss_grad_scale,
                         cudaStream_t stream);

}  // namespace sextant::kernels
