// FLOPs of a training step: model FLOPs (forward + backward, counted once) and
// hardware FLOPs (adding what recomputation runs again).
//
// One multiply-add is 2 FLOPs; backward costs twice the forward (one GEMM for
// the input gradient, one for the weight gradient; Narayanan et al. 2021, Sec. 5.1).
// Attention counts the full s×s score matrix by default, as Megatron-LM and the
// published MFU figures do, although a causal kernel skips half of it;
// AttentionCounting::kCausal counts only the scores a causal mask keeps.
// With a sliding window w < s each query sees at most w keys (s·w, or
// s·w − w²/2 causally, in place of s², per sequence and head).
#pragma once

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// Which attention scores count as model FLOPs.
enum class AttentionCounting {
  kMegatron,  // every query against min(s, window) keys (Narayanan et al. 2021, eq. 3)
  kCausal,    // only the query-key pairs a causal (and sliding-window) mask keeps
};

/// Query-key pairs whose scores are counted, per sequence and head:
/// Megatron s·min(s, w); causal s²/2 for w ≥ s (the 4·s²·d/2 FLOPs FlashAttention-2
/// reports for causal attention, Dao 2023 Sec. 4.1) and s·w − w²/2 for w < s
/// (query i sees min(i, w) keys; the sum, to first order).
double attention_pairs_per_sequence(const ModelConfig& model, AttentionCounting counting);

/// Forward FLOPs of one transformer layer over `tokens` tokens in sequences of
/// length `seq_length`, by part.
struct LayerFlops {
  double qkv = 0;               // 2·T·h·(a·d + 2·g·d); MLA: its down and up projections
  double attention_scores = 0;  // Q·Kᵀ: 2·T·(pairs/s)·a·d (2·T·s·a·d without a window)
  double attention_values = 0;  // P·V: as Q·Kᵀ with the value head (MLA: d_v)
  double projection = 0;        // 2·T·a·d_v·h
  double mlp = 0;               // dense or the experts a token visits, plus shared expert
  double router = 0;            // MoE gate: 2·T·h·E
  double total() const {
    return qkv + attention_scores + attention_values + projection + mlp + router;
  }
  double attention_core() const { return attention_scores + attention_values; }
};

/// `moe_layer` selects the routed MLP (ignored for dense models).
LayerFlops layer_forward_flops(const ModelConfig& model, double tokens, bool moe_layer,
                               AttentionCounting counting = AttentionCounting::kMegatron);

/// Output layer (logits): 2·T·h·V.
double logits_forward_flops(const ModelConfig& model, double tokens);

struct StepFlops {
  double model_flops = 0;     // forward + backward of the whole model, once
  double hardware_flops = 0;  // model_flops + recomputation
};

/// FLOPs of one optimizer step over gbs sequences of seq_length tokens.
StepFlops step_flops(const ModelConfig& model, const ParallelLayout& layout,
                     AttentionCounting counting = AttentionCounting::kMegatron);

/// Model FLOPs counted causally over counted as Megatron does (kCausal over
/// kMegatron): the same for every layout and batch (both scale with gbs);
/// 0.987 for GPT-3 175B at s = 2048, where attention is a small part; it
/// falls as s grows. 1 for a model without FLOPs.
double causal_flops_fraction(const ModelConfig& model);

}  // namespace sextant::sim
