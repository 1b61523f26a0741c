#include "sim/core/transformer_shape.h"

#include "sim/core/layer_shape.h"

namespace sextant::sim {

TransformerShape transformer_shape_of(const ModelConfig& model, const ParallelLayout& layout) {
  const LayerShape shard = layer_shape(model, layout);
  TransformerShape s;
  s.num_layers = model.num_layers;
  s.hidden = static_cast<int>(shard.hidden);
  s.ffn_hidden = static_cast<int>(shard.ffn);
  s.heads = shard.heads;
  s.kv_heads = shard.kv_heads;
  s.head_dim = shard.head_dim;
  s.vocab = static_cast<int>(padded_vocab_size(model.vocab_size, layout.tp) / layout.tp);
  s.tp = layout.tp;
  s.sequence_parallel = layout.sp && layout.tp > 1;
  s.tp_comm_overlap = s.sequence_parallel && layout.tp_comm_overlap;
  s.seq = static_cast<int>(model.seq_length / layout.cp);
  s.cp = layout.cp;
  s.cp_comm_type = layout.cp_comm_type;
  s.micro_batch = layout.mbs;
  s.layernorm = model.normalization == Normalization::kLayerNorm;
  s.gelu = !shard.swiglu;
  s.bias = model.add_bias_linear;
  s.learned_positions = model.position_embedding == PositionEmbedding::kLearnedAbsolute;
  s.tie_embeddings = model.tie_embeddings;
  s.rope_theta = static_cast<float>(model.rotary_base);
  if (model.moe) {
    s.experts = model.moe->num_experts;
    s.ep = layout.ep;
    s.local_experts = model.moe->num_experts / layout.ep;
    s.router_topk = model.moe->router_topk;
    s.expert_ffn_hidden = static_cast<int>(model.moe->ffn_hidden_size / layout.etp);
    s.first_dense_layers = model.moe->first_dense_layers;
    // The engine's sharded buckets: 8 elements per rank of dp x cp (cp = 1 with ep > 1).
    if (layout.ep > 1 && layout.zero >= 1)
      s.expert_run_align_elements = 8 * static_cast<std::size_t>(layout.dp) * static_cast<std::size_t>(layout.cp);
  }
  return s;
}

TransformerShape transformer_shape_of(const ModelConfig& model, int micro_batch, int seq_length) {
  ModelConfig at_length = model;
  at_length.seq_length = seq_length;
  ParallelLayout one_gpu;
  one_gpu.mbs = micro_batch;
  return transformer_shape_of(at_length, one_gpu);
}

}  // namespace sextant::sim
