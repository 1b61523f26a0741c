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

// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, Sec. 2.1.2-2.1.3,
// eqs. 9-19), n heads: W^DQ h×d_c' and its norm, W^UQ (with W^QR) d_c'×n(d_nope+d_rope)
// (without query compression W^Q h×n(d_nope+d_rope)); W^DKV with W^KR
// h×(d_c+d_rope) and the latent's norm; W^UK with W^UV d_c×n(d_nope+d_v); W^O
// n·d_v×h. No biases (Megatron-Core builds them with bias=False; the output
// projection follows add_bias_linear). The down projections and the norms are
// replicated across tensor-parallel ranks, the rest split by heads.
void add_mla_params(const ModelConfig& m, LayerParams& p) {
  const MlaConfig& a = *m.mla;
  const double h = static_cast<double>(m.hidden_size);
  const double n = m.num_attention_heads;
  const double q_rank = static_cast<double>(a.q_lora_rank);
  const double kv_rank = static_cast<double>(a.kv_lora_rank);
  const double qk = m.qk_head_dim();
  const double v = a.v_head_dim;
  // The latent norms are RMSNorm in DeepSeek: one scale per channel.
  const double latent_norm = m.normalization == Normalization::kLayerNorm ? 2.0 : 1.0;
  const double q_in = q_rank > 0 ? q_rank : h;
  p.attention = q_in * n * qk + kv_rank * n * (a.qk_nope_head_dim + v) + n * v * h +
                (m.add_bias_linear ? h : 0.0);
  p.attention_replicated = (q_rank > 0 ? h * q_rank + latent_norm * q_rank : 0.0) +
                           h * (kv_rank + a.qk_rope_head_dim) + latent_norm * kv_rank;
}
}  // namespace

LayerParams layer_params(const ModelConfig& m, bool moe_layer) {
  const double h = static_cast<double>(m.hidden_size);
  const double q = static_cast<double>(m.query_width());
  const double kv = static_cast<double>(m.kv_width());
  LayerParams p;
  const double qkv_bias = m.add_bias_linear || m.add_qkv_bias ? q + 2 * kv : 0.0;
  p.attention = h * (q + 2 * kv) + q * h + qkv_bias + (m.add_bias_linear ? h : 0.0);
  if (m.mla) add_mla_params(m, p);
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

double active_params(const ModelConfig& m) {
  double moe_layer = 0;
  if (m.moe) {
    const LayerParams p = layer_params(m, true);
    moe_layer = p.total() - p.experts + p.experts * m.moe->router_topk / m.moe->num_experts;
  }
  return m.dense_layers() * layer_params(m, false).total() + m.moe_layers() * moe_layer +
         embedding_params(m) + output_layer_params(m) + norm_params(m);
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
    return (p.attention + p.dense_mlp) / l.tp + p.attention_replicated + p.norms + p.router;
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

StageParams largest_stage_params_per_gpu(const ModelConfig& m, const ParallelLayout& l,
                                         const PipelineSplit& split) {
  StageParams params;
  for (int s = 0; s < l.pp; ++s) {
    if (s > 0 && split.stage(s - 1).covers(split.stage(s))) continue;  // holds no more
    const StageParams here = stage_params_per_gpu(m, l, split.stage(s));
    if (s == 0 || here.total() > params.total()) params = here;
  }
  return params;
}

double optimizer_params_per_gpu(const StageParams& params, const ParallelLayout& l) {
  return l.zero >= 1 ? params.dense / (static_cast<double>(l.dp) * l.cp) + params.expert / l.expert_dp()
                     : params.total();
}

}  // namespace sextant::sim
