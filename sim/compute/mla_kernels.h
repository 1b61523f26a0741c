// Multi-head latent attention's projections as Megatron-Core runs them
// (megatron/core/transformer/multi_latent_attention.py, MLASelfAttention, with
// Transformer Engine): what replaces the fused QKV GEMM and the RoPE kernel of
// a standard attention block. The core attention and the output projection
// stay in the layer's list, with the asymmetric head widths.
#pragma once

#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// Adds, for one micro-batch on one GPU, the query and key-value down
/// projections, the latent norms, the up projections and the fused RoPE
/// application of `model.mla` (which must be set).
void add_mla_projections(PassTime& t, const ModelConfig& model, const ParallelLayout& layout,
                         const DeviceRates& rates);

/// Width of what the attention block's column-parallel GEMMs gather from (or
/// all-reduce the gradient of) over the tensor-parallel group, per token:
/// hidden_size for standard attention; under MLA the down projections run
/// before that on every rank, so it is the latents q_lora_rank + kv_lora_rank
/// and the shared RoPE key qk_rope_head_dim (hidden_size in place of
/// q_lora_rank without query compression).
double attention_tp_entry_width(const ModelConfig& model);

}  // namespace sextant::sim
