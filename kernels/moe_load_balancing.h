// Keeping the experts' loads even: the values of the router's two losses, the
// statistics the Switch loss's gradient needs, and DeepSeek-V3's bias update with
// the step's load it reads.
// (The losses' gradients are added by moe_router_backward.)
//
// Switch load-balancing loss (Fedus et al. 2021, eq. 4), per group g of S
// consecutive tokens (the whole micro-batch, or one sequence: MoeRouterLossOptions),
// averaged over the G = tokens / S groups:
//   L_aux = alpha N / G sum_g sum_i f_gi P_gi,
//   f_gi = count_gi / (k S)  the share of the group's k S choices that went to expert i,
//   P_gi = (1/S) sum_{t in g} p_ti  the mean balancing probability of expert i,
// p the softmax of the logits (sigmoid router: the sigmoid scores over their sum,
// DeepSeek-V3 eq. 19). Dividing f by k, as Megatron-Core does, makes a uniform
// router's loss alpha at any k.
// Router z-loss (ST-MoE, Zoph et al. 2022, eq. 5): L_z = c_z (1/T) sum_t lse_t^2.
//
// Everything is deterministic: fixed-order sums, no floating-point atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/moe_router.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// Device workspace moe_aux_loss_statistics needs (per-chunk partial sums).
std::size_t moe_aux_loss_statistics_workspace_bytes(int tokens, int experts, int group_tokens);

/// Per balancing group g (group_tokens consecutive tokens; 0: all tokens):
///   prob_sums[g, i] = sum_{t in g} p_ti    (groups, experts) fp32, written
///   group_counts[g, i] = #{t in g : i in topk_ids[t, :]}    (groups, experts) fp32, written
///     (exact: integers below 2^24)
/// logits, row_lse and row_score_sum as moe_router_forward took and wrote them;
/// topk_ids: (tokens, topk). Across ranks, sum both (all-reduce) before the loss
/// value and the backward when the loss is to balance over several ranks' tokens.
/// workspace: moe_aux_loss_statistics_workspace_bytes, 16-byte aligned.
void moe_aux_loss_statistics(float* prob_sums, float* group_counts, const float* logits,
                             const float* row_lse, const float* row_score_sum,
                             const std::int32_t* topk_ids, int tokens, int experts,
                             const MoeRouterOptions& options, int group_tokens, void* workspace,
                             std::size_t workspace_bytes, cudaStream_t stream);

/// The losses' values (device scalars, written; either may be null to skip it):
///   *aux_loss = L_aux from prob_sums and group_counts (shapes as above),
///   *z_loss = L_z from row_lse (tokens).
void moe_router_loss_values(float* aux_loss, float* z_loss, const float* prob_sums,
                            const float* group_counts, const float* row_lse, int tokens, int experts,
                            int topk, const MoeRouterLossOptions& losses, cudaStream_t stream);

/// DeepSeek-V3's auxiliary-loss-free balancing (arXiv:2412.19437, Sec. 2.1.2): after
/// each step, expert_bias[i] += update_rate * sign(mean load - load_i), with
/// load_i = tokens_per_expert[i] (summed over the step's micro-batches and ranks) and
/// the mean over the experts (Megatron-Core's get_updated_expert_bias;
/// --moe-router-bias-update-rate, 1e-3 in DeepSeek-V3). An expert exactly at the
/// mean keeps its bias. expert_bias: (experts) fp32, updated in place.
void moe_expert_bias_update(float* expert_bias, const std::int32_t* tokens_per_expert, int experts,
                            float update_rate, cudaStream_t stream);

/// The load that update reads, gathered over a step: total[i] += tokens_per_expert[i]
/// for each of `experts` (int32, exact), once per micro-batch's forward (Megatron-Core's
/// router adds each forward's counts into its local_tokens_per_expert the same way).
/// total and tokens_per_expert: (experts) int32.
void moe_accumulate_expert_load(std::int32_t* total, const std::int32_t* tokens_per_expert, int experts,
                                cudaStream_t stream);

}  // namespace sextant::kernels
