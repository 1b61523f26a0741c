#include "sim/flops/model_flops.h"

namespace sextant::sim {

namespace {
// One MLP of width `ffn`: GeLU has fc1 (h→f) and fc2 (f→h): 4·T·h·f; SwiGLU adds
// the gate projection: 6·T·h·f (Shazeer 2020).
double mlp_forward_flops(const ModelConfig& m, double tokens, double ffn) {
  return 2.0 * tokens * static_cast<double>(m.hidden_size) * ffn *
         (m.mlp_input_projections() + 1);
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
  LayerFlops f;
  f.qkv = 2.0 * tokens * h * (q + 2.0 * kv);
  f.attention_scores = 2.0 * tokens * keys * q;
  f.attention_values = 2.0 * tokens * keys * q;
  f.projection = 2.0 * tokens * q * h;
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

}  // namespace sextant::sim
