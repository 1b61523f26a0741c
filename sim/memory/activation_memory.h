// Activation memory: what the forward pass keeps for the backward pass.
//
// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models"), Sec. 4: 34·s·b·h + 5·a·s²·b bytes per layer for GPT
// without parallelism, /t for what tensor parallelism splits, /t for the rest
// under sequence parallelism, the s² terms gone with selective recomputation,
// 2·s·b·h per layer with full recomputation. The implementation counts each
// stored tensor, so GQA, SwiGLU, MoE, dropout-free models and flash attention
// (which keeps no s×s matrix; Dao et al. 2022) follow from the same list; the
// GPT case reduces to the paper's Table 2 (tests/sim/memory check it).
#pragma once

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/pipeline_split.h"

namespace sextant::sim {

/// Bytes one GPU keeps for one layer and one micro-batch, with every tensor
/// stored (no recomputation), except the s×s terms when `drop_attention_core`.
double layer_activation_bytes(const ModelConfig& model, const ParallelLayout& layout,
                              bool moe_layer, bool drop_attention_core);

/// Bytes one GPU keeps for one layer and one micro-batch under layout.recompute.
double stored_layer_activation_bytes(const ModelConfig& model, const ParallelLayout& layout,
                                     bool moe_layer);

/// Micro-batches whose activations the first pipeline stage holds at its peak,
/// in units of "all of this stage's layers for one micro-batch":
/// GPipe m; 1F1B min(p, m); interleaved p·(1 + (p−1)/(p·v)) (Korthikanti et al.
/// 2022, Sec. 4.2.3; Narayanan et al. 2021, Sec. 2.2).
double first_stage_inflight_microbatches(const ParallelLayout& layout);

/// Peak activation bytes of pipeline stage `stage` (0 or pp−1 are the extremes):
/// in-flight micro-batches of its layers, embedding and output-layer buffers,
/// and the one layer being recomputed under full recomputation.
double stage_activation_bytes(const ModelConfig& model, const ParallelLayout& layout, int stage);
/// The same for stage `stage` holding `layers` (of a split already computed).
double stage_activation_bytes(const ModelConfig& model, const ParallelLayout& layout, int stage,
                              const StageLayers& layers);

}  // namespace sextant::sim
