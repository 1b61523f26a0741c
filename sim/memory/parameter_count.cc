#include "sim/memory/parameter_count.h"

#include "sim/core/layer_shape.h"

namespace sextant::sim {

namespace {
double norm_params(const ModelConfig& m) {
  // LayerNorm has a scale and a bias, RMSNorm a scale (Zhang & Sennrich 2019).
  return (m.normalization == Normalization::kLayerNorm ? 2.0 : 1.0) *
         static_cast<double>(m.hidden_size);
}

double mlp_params(const ModelConfig& m, double ffn) {
  const double h = static_cast<double>(m.hidden_size);
  const double weights = h * ffn * (m.mlp_input_projections() + 1);
  const double biases = m.add_bias_linear ? ffn * m.mlp_input_projections() + h : 0.0;
  return ffn > 0 ? weights + biases : 0.0;
}
}  // namespace

LayerParams layer_params(const ModelConfig& m, bool moe_layer) {
  const double h = static_cast<double>(m.hidden_size);
  const double q = static_cast<double>(m.query_width());
  const double kv = static_cast<double>(m.kv_width());
  LayerParams p;
  const double qkv_bias = m.add_bias_linear || m.add_qkv_bias ? q + 2 * kv : 0.0;
  p.attention = h * (q + 2 * kv) + q * h + qkv_bias + (m.add_bias_linear ? h : 0.0);
  p.norms = 2 * norm_params(m);
  if (moe_layer && m.moe) {
    const MoeConfig& e = *m.moe;
    p.experts = e.num_experts * mlp_params(m, static_cast<double>(e.ffn_hidden_size));
    p.dense_mlp = mlp_params(m, static_cast<double>(e.shared_expert_ffn_hidden_size));
    p.router = h * e.num_experts;
  } else {
    p.dense_mlp = mlp_params(m, static_cast<double>(m.ffn_hidden_size));
  }
  return p;
}

double embedding_params(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double positions = m.position_embedding == PositionEmbedding::kLearnedAbsolute
                               ? static_cast<double>(m.seq_length) * h
                               : 0.0;
  return static_cast<double>(m.vocab_size) * h + positions;
}

double output_layer_params(const ModelConfig& m) {
  return m.tie_embeddings ? 0.0 : static_cast<double>(m.vocab_size) * m.hidden_size;
}

double total_params(const ModelConfig& m) {
  return m.dense_layers() * layer_params(m, false).total() +
         m.moe_layers() * layer_params(m, true).total() + embedding_params(m) +
         output_layer_params(m) + norm_params(m);
}

StageParams stage_params_per_gpu(const ModelConfig& m, const ParallelLayout& l, int stage) {
  return stage_params_per_gpu(m, l, pipeline_split(m, l).stage(stage));
}

StageParams stage_params_per_gpu(const ModelConfig& m, const ParallelLayout& l,
                                 const StageLayers& stage) {
  // The split says how many of the stage's layers are dense (the model's
  // leading first_dense_layers) and whether it holds the embedding or the loss.
  const int dense_here = stage.dense_layers;
  const int moe_here = stage.moe_layers();
  const LayerParams dense = layer_params(m, false);
  const LayerParams moe = layer_params(m, true);
  auto sharded = [&](const LayerParams& p) {
    return (p.attention + p.dense_mlp) / l.tp + p.norms + p.router;
  };
  StageParams out;
  out.dense = dense_here * sharded(dense) + moe_here * sharded(moe);
  out.expert = moe_here * moe.experts / (static_cast<double>(l.ep) * l.etp);
  const double h = static_cast<double>(m.hidden_size);
  const double vocab_shard = vocab_rows_per_rank(m, l.tp) * h;  // of the padded vocabulary
  if (stage.embedding) out.dense += embedding_params(m) - static_cast<double>(m.vocab_size) * h +
                               vocab_shard;
  if (stage.loss) {
    out.dense += norm_params(m);  // final norm
    // Untied: the output layer. Tied with pp > 1: the last stage keeps its own copy
    // of the word embedding, kept in sync by an all-reduce (Megatron-LM).
    if (!m.tie_embeddings || l.pp > 1) out.dense += vocab_shard;
  }
  return out;
}

}  // namespace sextant::sim
