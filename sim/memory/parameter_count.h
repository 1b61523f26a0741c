// Parameter counts of the model and of what one GPU holds.
//
// Layer weights are split by tp (attention, dense MLP) or by ep·etp (experts);
// the word embedding and output layer are split by tp (vocab-parallel) and live
// on the first and last pipeline stage (Shoeybi et al. 2019; Narayanan et al. 2021).
#pragma once

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/pipeline_split.h"

namespace sextant::sim {

/// Parameters of one layer, split by how they are sharded.
struct LayerParams {
  double attention = 0;  // QKV (MLA: the up projections), projection (+ biases); sharded by tp
  /// MLA's down projections W^DQ, W^DKV/W^KR and the latent norms: every
  /// tensor-parallel rank holds them whole (Megatron-Core MLASelfAttention builds
  /// linear_q_down_proj and linear_kv_down_proj as duplicated TELinear). 0 without MLA.
  double attention_replicated = 0;
  double norms = 0;      // the layer's two norms; replicated across tp
  double dense_mlp = 0;  // dense MLP or shared expert; sharded by tp
  double experts = 0;    // all routed experts; sharded by ep·etp
  double router = 0;     // replicated
  double total() const {
    return attention + attention_replicated + norms + dense_mlp + experts + router;
  }
};

LayerParams layer_params(const ModelConfig& model, bool moe_layer);

/// Word embedding (V·h), learned positions (s·h) when used; output layer V·h when untied.
double embedding_params(const ModelConfig& model);
double output_layer_params(const ModelConfig& model);  // 0 when tied
/// Whole model (what "175B" counts).
double total_params(const ModelConfig& model);
/// Parameters one token's forward touches: every dense weight, and in a MoE
/// layer the router, the shared expert and router_topk routed experts
/// (what DeepSeek-V3's "37B activated" counts); the word embedding and output
/// layer included. Equals total_params for a dense model.
double active_params(const ModelConfig& model);

/// What one GPU of a pipeline stage holds, split by which data-parallel group
/// shards its optimizer state: dense parameters by dp·cp, expert ones by expert-dp.
struct StageParams {
  double dense = 0;
  double expert = 0;
  double total() const { return dense + expert; }
};
/// `stage` in [0, pp). The first stage holds the embedding, the last the output
/// layer (or, when tied and pp > 1, a copy of the embedding) and final norm.
StageParams stage_params_per_gpu(const ModelConfig& model, const ParallelLayout& layout, int stage);
/// The same for a stage of a split already computed (what the hot paths use).
StageParams stage_params_per_gpu(const ModelConfig& model, const ParallelLayout& layout,
                                 const StageLayers& stage);
/// The stage whose GPUs hold the most: its data-parallel sync and its
/// optimizer step are the step's (both engines; every stage steps together).
StageParams largest_stage_params_per_gpu(const ModelConfig& model, const ParallelLayout& layout,
                                         const PipelineSplit& split);
/// The parameters one GPU's optimizer updates: all it holds, or its shard with
/// the distributed optimizer (zero >= 1): dense ones over dp·cp, expert ones
/// over expert-dp.
double optimizer_params_per_gpu(const StageParams& params, const ParallelLayout& layout);

}  // namespace sextant::sim
