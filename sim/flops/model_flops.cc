#include "sim/flops/model_flops.h"

namespace sextant::sim {

namespace {
// One MLP of width `ffn`: GeLU has fc1 (h→f) and fc2 (f→h): 4·T·h·f; SwiGLU adds
// the gate projection: 6·T·h·f (Shazeer 2020).
double mlp_forward_flops(const ModelConfig& m, double tokens, double ffn) {
  return 2.0 * tokens * static_cast<double>(m.hidden_size) * ffn *
         (m.mlp_input_projections() + 1);
}

// Multi-head latent attention's projections before the core (DeepSeek-V2,
// arXiv:2405.04434, eqs. 9-17), n heads, per token: the query down projection
// h·d_c' and up projection d_c'·n(d_nope+d_rope) (or h·n(d_nope+d_rope) without
// query compression), the joint key-value down projection with the shared RoPE
// key h·(d_c+d_rope), and its up projection d_c·n(d_nope+d_v); 2 FLOPs each.
double mla_projection_flops(const ModelConfig& m, double tokens) {
  const MlaConfig& a = *m.mla;
  const double h = static_cast<double>(m.hidden_size);
  const double n = m.num_attention_heads;
  const double qk = m.qk_head_dim();
  const double q_rank = static_cast<double>(a.q_lora_rank);
  const double kv_rank = static_cast<double>(a.kv_lora_rank);
  const double query = q_rank > 0 ? h * q_rank + q_rank * n * qk : h * n * qk;
  const double key_value =
      h * (kv_rank + a.qk_rope_head_dim) + kv_rank * n * (a.qk_nope_head_dim + a.v_head_dim);
  return 2.0 * tokens * (query + key_value);
}
}  // namespace

double attention_pairs_per_sequence(const ModelConfig& m, AttentionCounting counting) {
  const double s = static_cast<double>(m.seq_length);
  const double w = static_cast<double>(m.attention_span());
  if (counting == AttentionCounting::kMegatron) return s * w;
  return w < s ? s * w - w * w / 2.0 : s * s / 2.0;
}

LayerFlops layer_forward_flops(const ModelConfig& m, double tokens, bool moe_layer,
                               AttentionCounting counting) {
  const double h = static_cast<double>(m.hidden_size);
  // Keys per query, on average over the sequence: s without a window (Megatron).
  const double keys = m.seq_length > 0 ? attention_pairs_per_sequence(m, counting) /
                                             static_cast<double>(m.seq_length)
                                       : 0.0;
  const double q = static_cast<double>(m.query_width());
  const double kv = static_cast<double>(m.kv_width());
  // The attention output, n·d_v wide: q itself except under MLA.
  const double out = static_cast<double>(m.attention_output_width());
  LayerFlops f;
  f.qkv = m.mla ? mla_projection_flops(m, tokens) : 2.0 * tokens * h * (q + 2.0 * kv);
  f.attention_scores = 2.0 * tokens * keys * q;
  f.attention_values = 2.0 * tokens * keys * out;
  f.projection = 2.0 * tokens * out * h;
  if (moe_layer && m.moe) {
    const MoeConfig& e = *m.moe;
    f.router = 2.0 * tokens * h * e.num_experts;
    f.mlp = e.router_topk * mlp_forward_flops(m, tokens, static_cast<double>(e.ffn_hidden_size)) +
            mlp_forward_flops(m, tokens, static_cast<double>(e.shared_expert_ffn_hidden_size));
  } else {
    f.mlp = mlp_forward_flops(m, tokens, static_cast<double>(m.ffn_hidden_size));
  }
  return f;
}

double logits_forward_flops(const ModelConfig& m, double tokens) {
  return 2.0 * tokens * static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
}

StepFlops step_flops(const ModelConfig& m, const ParallelLayout& l, AttentionCounting counting) {
  const double tokens = static_cast<double>(l.gbs) * static_cast<double>(m.seq_length);
  const LayerFlops dense = layer_forward_flops(m, tokens, false, counting);
  const LayerFlops moe = layer_forward_flops(m, tokens, true, counting);
  const double layers_forward = m.dense_layers() * dense.total() + m.moe_layers() * moe.total();
  const double forward = layers_forward + logits_forward_flops(m, tokens);
  StepFlops out;
  out.model_flops = 3.0 * forward;  // forward + backward (2× forward)
  switch (l.recompute) {
    case Recompute::kNone:
      out.hardware_flops = out.model_flops;
      break;
    case Recompute::kSelective:
      // Korthikanti et al. 2022, Sec. 5: recompute only the attention core (QKᵀ, softmax, ·V).
      out.hardware_flops = out.model_flops + m.dense_layers() * dense.attention_core() +
                           m.moe_layers() * moe.attention_core();
      break;
    case Recompute::kFull:
      // Every layer's forward runs again before its backward; the logits do not.
      out.hardware_flops = out.model_flops + layers_forward;
      break;
  }
  return out;
}

double causal_flops_fraction(const ModelConfig& model) {
  ParallelLayout one;  // one sequence; the fraction does not depend on the layout
  one.gbs = 1;
  const double megatron = step_flops(model, one, AttentionCounting::kMegatron).model_flops;
  const double causal = step_flops(model, one, AttentionCounting::kCausal).model_flops;
  return megatron > 0 ? causal / megatron : 1.0;
}

}  // namespace sextant::sim
