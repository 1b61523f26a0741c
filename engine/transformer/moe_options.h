// How an MoE layer routes and balances its tokens: the training options of
// Megatron-Core's MoE (its --moe-* arguments), apart from the model's shape
// (experts, top-k, expert width: the preset's `moe:` keys, TransformerShape).
#pragma once

#include <optional>

#include "kernels/moe_grouped_gemm.h"
#include "kernels/moe_router.h"
#include "kernels/moe_routing_map.h"

namespace sextant::engine::transformer {

struct MoeOptions {
  /// kernels/moe_router.h: softmax (Mixtral, Qwen3-MoE) or sigmoid (DeepSeek-V3)
  /// scores; weights renormalised over the selected experts (Megatron's default
  /// for softmax; Qwen3's norm_topk_prob).
  kernels::MoeScoreFunction score_function = kernels::MoeScoreFunction::kSoftmax;
  bool normalize_topk = true;
  /// The Switch load-balancing loss's alpha (Fedus et al. 2021, eq. 4;
  /// Megatron's --moe-aux-loss-coeff). 1e-2 is Switch's value and Megatron's
  /// Mixtral recipes'; 0 turns it off. Per sequence (DeepSeek-V3's seq_aux)
  /// instead of per micro-batch when aux_loss_per_sequence.
  double aux_loss_coeff = 1e-2;
  bool aux_loss_per_sequence = false;
  /// ST-MoE's router z-loss coefficient (Zoph et al. 2022, eq. 5); 0: off.
  double z_loss_coeff = 0.0;
  /// DeepSeek-V3's auxiliary-loss-free balancing (Liu et al. 2024, arXiv:2412.19437,
  /// Sec. 2.1.2, eq. 16): each MoE layer keeps a per-expert bias, added to the sigmoid
  /// scores for the top-k selection only (the weights use the unbiased scores), and
  /// after every step each bias moves by this rate towards the mean load
  /// (kernels/moe_load_balancing.h: b_i += rate * sign(mean load - load_i), the load
  /// summed over the step's micro-batches and ranks). 0: off, no bias. Megatron's
  /// --moe-router-enable-expert-bias with --moe-router-bias-update-rate (default
  /// 1e-3, DeepSeek-V3's gamma for its first 14.3T tokens, Sec. 4.2). Needs the
  /// sigmoid score function (the trainer refuses it with softmax).
  double expert_bias_update_rate = 0.0;
  /// Dropless (0, Megatron's default) or each expert's capacity factor
  /// (--moe-expert-capacity-factor), with the drop policy and padding of
  /// kernels/moe_routing_map.h.
  double capacity_factor = 0.0;
  kernels::MoeDropPolicy drop_policy = kernels::MoeDropPolicy::kProbs;
  bool pad_to_capacity = false;
  /// The experts' GEMMs' backend (kernels/moe_grouped_gemm.h); unset: chosen by
  /// the FLOPs of an expert's product against the host time of a launch (moe_layer.cc).
  std::optional<kernels::MoeGemmBackend> gemm_backend;
  /// d(step loss) / d(one micro-batch's router losses): the trainer sets it to
  /// 1 / (micro-batches of the global batch), so that the router losses enter
  /// as their mean over the step, as the language-model loss does.
  float router_loss_weight = 1.0f;
};

}  // namespace sextant::engine::transformer
