#include "sim/compute/layer_time.h"

#include "sim/compute/gemm_time.h"
#include "sim/core/layer_shape.h"

namespace sextant::sim {

namespace {

// Element-wise kernels move data at the achieved HBM rate; their backward reads
// the saved input and the incoming gradient and writes the input gradient, about
// twice the forward's traffic.
constexpr double kBackwardToForwardElementwiseBytes = 2.0;

// Vocabulary-parallel cross entropy (Megatron-LM tensor_parallel/cross_entropy.py,
// logits cast to fp32 first), bytes per logit: forward float() 2+4, max 4,
// subtract 4+4, exp 4+4, sum 4, divide 4+4 = 38; backward in-place scale 4+4 and
// the cast back to bf16 4+2 = 14.
constexpr double kCrossEntropyForwardBytesPerLogit = 38.0;
constexpr double kCrossEntropyBackwardBytesPerLogit = 14.0;

struct LayerShapes {
  double tokens;      // T = mbs·s/cp, the GEMMs' m
  double hidden;      // h
  double replicated;  // tokens·h on which norms and dropout run per GPU (÷tp under sp)
};

// Forward and backward (input-gradient and fp32-accumulating weight-gradient) of
// one linear layer m×k · k×n.
void add_linear(PassTime& t, double m, double n, double k, double batch, const DeviceRates& r) {
  const double forward = gemm_time_s({m, n, k, batch, false}, r.gemm_flops_per_s, r);
  const double weight_gradient = gemm_time_s({k, n, m, batch, true}, r.gemm_flops_per_s, r);
  const double backward =
      gemm_time_s({m, k, n, batch, false}, r.gemm_flops_per_s, r) + weight_gradient;
  t.forward_s += forward;
  t.backward_s += backward;
  t.gemm_forward_s += forward;
  t.gemm_backward_s += backward;
  t.weight_gradient_s += weight_gradient;
}

void add_elementwise(PassTime& t, double forward_bytes, int forward_kernels,
                     const DeviceRates& r) {
  t.forward_s += forward_bytes / r.memory_bytes_per_s + forward_kernels * r.kernel_overhead_s;
  t.backward_s += kBackwardToForwardElementwiseBytes *
                  (forward_bytes / r.memory_bytes_per_s + forward_kernels * r.kernel_overhead_s);
}

// MLP GEMMs of width `ffn` (split by `split`) over `tokens`, in `batch` groups.
void add_mlp(PassTime& t, const ModelConfig& m, double tokens, double ffn, double split,
             double batch, const DeviceRates& r) {
  if (ffn <= 0 || tokens <= 0) return;
  const double h = static_cast<double>(m.hidden_size);
  add_linear(t, tokens / batch, ffn * m.mlp_input_projections() / split, h, batch, r);
  add_linear(t, tokens / batch, h, ffn / split, batch, r);
  // Activation: GeLU reads and writes f (bias fused); SwiGLU reads 2f, writes f.
  const double activation_bytes = 2.0 * tokens * ffn / split * (m.mlp_input_projections() + 1);
  add_elementwise(t, activation_bytes, 1, r);
}

void add_attention_core(PassTime& t, const ModelConfig& m, const ParallelLayout& l,
                        const DeviceRates& r) {
  const double s = static_cast<double>(m.seq_length);
  const LayerShape shape = layer_shape(m, l);
  const double d = shape.head_dim;
  const double heads = shape.heads;
  const double before = t.forward_s;
  const double before_backward = t.backward_s;
  if (l.attention == AttentionKernel::kFlash) {
    // Causal flash attention does half of the 4·s²·d FLOPs per head and sequence;
    // its backward recomputes the scores: 5 GEMMs to the forward's 2, so 2.5×
    // (Dao 2023, FlashAttention-2, Sec. 3). Context parallelism splits the work evenly.
    // Few query tiles (batch·heads·s/128 per GPU) leave SMs idle: the rate is
    // scaled by u/(u + u_half), fitted on our H100 cuDNN attention sweep.
    const double forward_flops = l.mbs * heads * 4.0 * s * s * d / 2.0 / l.cp;
    const double tiles = l.mbs * heads * s / l.cp / 128.0;
    const double occupancy = tiles / (tiles + r.attention_half_efficiency_tiles);
    t.forward_s +=
        forward_flops / (r.attention_forward_flops_per_s * occupancy) + r.kernel_overhead_s;
    t.backward_s += 2.5 * forward_flops / (r.attention_backward_flops_per_s * occupancy) +
                    r.kernel_overhead_s;
  } else {
    // Megatron's unfused path: batched Q·Kᵀ and P·V over every score (no causal
    // skip), a fused scale-mask-softmax (read 2 + write 2 bytes per score) and,
    // with attention dropout, a dropout (read 2, write 2, mask 1).
    const double batch = l.mbs * heads;
    PassTime core;
    add_linear(core, s, s, d, batch, r);  // scores = Q·Kᵀ
    add_linear(core, s, d, s, batch, r);  // context = P·V
    // The batched GEMMs produce activations, not weight gradients: no fp32 accumulation;
    // add_linear's accounting is close enough (the C of both is bf16-sized here).
    t.forward_s += core.forward_s;
    t.backward_s += core.backward_s;
    const double scores = batch * s * s;
    const double per_score = 4.0 + (m.attention_dropout > 0 ? 5.0 : 0.0);
    add_elementwise(t, per_score * scores, m.attention_dropout > 0 ? 2 : 1, r);
  }
  t.attention_core_forward_s += t.forward_s - before;
  t.attention_core_backward_s += t.backward_s - before_backward;
}

}  // namespace

PassTime layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r,
                    bool moe_layer) {
  PassTime t;
  const LayerShape shape = layer_shape(m, l);  // one rank's shard, as the engine runs it
  const double T = static_cast<double>(shape.tokens);
  const double h = static_cast<double>(shape.hidden);
  const double tp = l.tp;
  // Without sequence parallelism every TP rank runs the norms and dropouts on all T tokens.
  const double W = shape.norm_tokens() * h;
  const double dropout_add_bytes = m.hidden_dropout > 0 ? 7.0 : 6.0;  // x, residual in; out (+mask)

  // Attention block: norm (read+write 2+2 bytes), QKV, core, projection, dropout-add.
  add_elementwise(t, 4.0 * W, 1, r);
  add_linear(t, T, static_cast<double>(shape.qkv_width()), h, 1, r);
  if (m.position_embedding == PositionEmbedding::kRope) {
    // rotate Q and K in place
    add_elementwise(t, 2.0 * 2.0 * T * static_cast<double>(shape.q_width() + shape.kv_width()), 1, r);
  }
  add_attention_core(t, m, l, r);
  add_linear(t, T, h, static_cast<double>(shape.q_width()), 1, r);
  add_elementwise(t, dropout_add_bytes * W, 1, r);
  t.attention_forward_s = t.forward_s;
  t.attention_backward_s = t.backward_s;
  t.attention_weight_gradient_s = t.weight_gradient_s;

  // MLP block: norm, MLP (dense, or router + routed experts + shared expert), dropout-add.
  add_elementwise(t, 4.0 * W, 1, r);
  if (moe_layer && m.moe) {
    const MoeConfig& e = *m.moe;
    add_linear(t, T, e.num_experts, h, 1, r);  // router logits
    // Each GPU's experts see T·topk·etp/tp tokens (balanced routing), as a grouped
    // GEMM over its num_experts/ep local experts.
    const double expert_tokens = T * e.router_topk * l.etp / tp;
    const double local_experts = static_cast<double>(e.num_experts) / l.ep;
    add_mlp(t, m, expert_tokens, static_cast<double>(e.ffn_hidden_size), l.etp, local_experts, r);
    add_mlp(t, m, T, static_cast<double>(e.shared_expert_ffn_hidden_size), tp, 1, r);
    // Token permutation and un-permutation: read and write topk copies of each token.
    add_elementwise(t, 2.0 * 2.0 * 2.0 * expert_tokens * h, 2, r);
  } else {
    add_mlp(t, m, T, static_cast<double>(m.ffn_hidden_size), tp, 1, r);
  }
  add_elementwise(t, dropout_add_bytes * W, 1, r);

  if (r.fp8) {
    // FP8 GEMM inputs are cast (read 2 bytes, write 1) per GEMM input
    // activation: QKV, projection, fc1, fc2 (Micikevicius et al. 2022, Sec. 4).
    const double q = static_cast<double>(shape.q_width());
    add_elementwise(t, 3.0 * T * (2 * h + q + static_cast<double>(shape.ffn)), 4, r);
    // The attention block's share: the QKV and projection inputs, two kernels.
    PassTime attention_casts;
    add_elementwise(attention_casts, 3.0 * T * (h + q), 2, r);
    t.attention_forward_s += attention_casts.forward_s;
    t.attention_backward_s += attention_casts.backward_s;
  }
  return t;
}

PassTime output_layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r) {
  PassTime t;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double h = static_cast<double>(m.hidden_size);
  const double V = static_cast<double>(m.vocab_size);
  add_elementwise(t, 4.0 * T * h / (l.sp ? l.tp : 1.0), 1, r);  // final norm
  add_linear(t, T, V / l.tp, h, 1, r);
  const double logits = T * V / l.tp;
  t.forward_s += kCrossEntropyForwardBytesPerLogit * logits / r.memory_bytes_per_s +
                 6 * r.kernel_overhead_s;
  t.backward_s += kCrossEntropyBackwardBytesPerLogit * logits / r.memory_bytes_per_s +
                  3 * r.kernel_overhead_s;
  return t;
}

PassTime embedding_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r) {
  PassTime t;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double h = static_cast<double>(m.hidden_size);
  // Gather rows (write 2·T·h), add positions, dropout; backward scatters into the
  // fp32 embedding gradient.
  add_elementwise(t, 8.0 * T * h, 2, r);
  return t;
}

}  // namespace sextant::sim
