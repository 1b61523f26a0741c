// Megatron-LM's kernel list for one layer, as its published runs ran it
// (Megatron-Core 0.8 with Transformer Engine off: unfused dropout-add, norms
// and activations as separate kernels, vocabulary-parallel cross entropy in
// PyTorch ops, Adam over fp32 main grads). Chosen by `software: megatron-published`.
#include "sim/compute/layer_kernels.h"

#include "sim/compute/expert_kernels.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/mla_kernels.h"
#include "sim/compute/pass_time_terms.h"
#include "sim/core/layer_shape.h"
#include "sim/flops/model_flops.h"

namespace sextant::sim {

namespace {

// Vocabulary-parallel cross entropy (Megatron-LM tensor_parallel/cross_entropy.py,
// logits cast to fp32 first), bytes per logit: forward float() 2+4, max 4,
// subtract 4+4, exp 4+4, sum 4, divide 4+4 = 38; backward in-place scale 4+4 and
// the cast back to bf16 4+2 = 14.
constexpr double kCrossEntropyForwardBytesPerLogit = 38.0;
constexpr double kCrossEntropyBackwardBytesPerLogit = 14.0;
constexpr int kCrossEntropyForwardKernels = 6;
constexpr int kCrossEntropyBackwardKernels = 3;
// The same loss under --cross-entropy-loss-fusion (Megatron-Core
// fusions/fused_cross_entropy.py, jit-fused): calculate_logits_max reads the
// bf16 logits and writes their fp32 copy (2+4), calculate_predicted_logits
// reads it and writes exp (4+4), calculate_cross_entropy_loss divides in place
// (4+4) = 22 bytes in 3 kernels; backward calculate_gradients reads the saved
// softmax and writes the bf16 gradient (4+2) = 6 bytes in 1 kernel.
constexpr double kFusedCrossEntropyForwardBytesPerLogit = 22.0;
constexpr double kFusedCrossEntropyBackwardBytesPerLogit = 6.0;
constexpr int kFusedCrossEntropyForwardKernels = 3;
constexpr int kFusedCrossEntropyBackwardKernels = 1;

// Adam on fp32 master weights, bytes per parameter this GPU updates: read
// master, gradient, m, v (16), write master, m, v (12), write the bf16 weight
// (2), plus the gradient-norm pass reading the gradient (4).
constexpr double kOptimizerBytesPerParam = 34.0;

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
  // A query/key head of d_qk and a value head of d_v (equal but under MLA):
  // Q·Kᵀ costs 2·d_qk and P·V 2·d_v FLOPs per score, so the core is timed as
  // heads of their mean width, (d_qk + d_v)/2 (kernel_costs.h: attention_times).
  const double d_qk = m.qk_head_dim();
  const double d_v = m.value_head_dim();
  const double d = (d_qk + d_v) / 2.0;
  const double heads = shape.heads;
  const double before = t.forward_s;
  const double before_backward = t.backward_s;
  if (l.attention == AttentionKernel::kFlash) {
    // Causal flash attention (kernel_costs.h: attention_times). A sliding window
    // skips the key tiles outside it, so the time scales with the query-key
    // pairs computed (attention_pairs_per_sequence, sim/flops/model_flops.h)
    // over the causal s²/2.
    const double causal_pairs = s * s / 2.0;
    const double pairs_fraction =
        attention_pairs_per_sequence(m, AttentionCounting::kCausal) / causal_pairs;
    const AttentionTimes a = attention_times(l.mbs, heads, shape.kv_heads, s, d, l.cp, r);
    t.forward_s += a.forward_s * pairs_fraction;
    t.backward_s += a.backward_s * pairs_fraction;
  } else {
    // Megatron's unfused path: batched Q·Kᵀ and P·V over every score (no causal
    // or sliding-window skip: the mask is applied to the full s×s scores), a fused scale-mask-softmax (read 2 + write 2 bytes per score) and,
    // with attention dropout, a dropout (read 2, write 2, mask 1).
    const double batch = l.mbs * heads;
    PassTime core;
    add_linear(core, s, s, d_qk, batch, r);  // scores = Q·Kᵀ
    add_linear(core, s, d_v, s, batch, r);   // context = P·V
    // The batched GEMMs produce activations, not weight gradients: no fp32 accumulation;
    // add_linear's accounting is close enough (the C of both is bf16-sized here).
    t.forward_s += core.forward_s;
    t.backward_s += core.backward_s;
    const double scores = batch * s * s;
    const double per_score = 4.0 + (m.attention_dropout > 0 ? 5.0 : 0.0);
    add_elementwise(t, per_score * scores, m.attention_dropout > 0 ? 2 : 1, r);
  }
  t.attention_core_forward_s += t.forward_s - before;
  t.attention_core_run_forward_s = t.attention_core_forward_s;
  t.attention_core_backward_s += t.backward_s - before_backward;
}

// FP8 as Transformer Engine runs it under Megatron-Core/NeMo (TE 1.x,
// transformer_engine/pytorch/module/{layernorm_linear,layernorm_mlp,linear}.py):
// the norms write the QKV and fc1 inputs in FP8 themselves (layernorm_fwd_fp8)
// and the activation writes fc2's input in FP8, so the forward casts only the
// attention output for the projection (read 2, write 1 byte). The backward casts
// each output gradient to FP8 with its transpose in one kernel (cast_transpose:
// read 2, write 1 + 1) for the QKV, projection and fc2 GEMMs (fc1's comes out of
// the fused activation backward, dgelu + cast + transpose), and transposes the
// saved FP8 inputs for the weight gradients (read 1, write 1: fp8_transpose of
// the QKV, fc1, projection and fc2 inputs), as Hopper's FP8 GEMMs take only the
// TN layout. Weights are cast once per step (is_first_microbatch), not here.
//
// The MLP's FP8 GEMM inputs one GPU converts per micro-batch: `rows` tokens of
// width h enter fc1 and leave fc2; `activations` elements (rows x ffn width)
// enter fc2. A MoE layer's experts see their routed tokens, its shared expert all.
struct MlpFp8Shape {
  double rows = 0;
  double activations = 0;
};

// Adds the conversions above to one layer's forward and backward.
void add_fp8_conversions(PassTime& t, const LayerShape& shape, const MlpFp8Shape& mlp,
                         const DeviceRates& r) {
  const double T = static_cast<double>(shape.tokens);
  const double h = static_cast<double>(shape.hidden);
  const double q = static_cast<double>(shape.q_width());
  const double kv = static_cast<double>(shape.kv_width());
  const double forward_s = 3.0 * T * q / r.memory_bytes_per_s + r.kernel_overhead_s;
  // cast_transpose of the QKV, projection and fc2 output gradients; transposes
  // of the QKV, projection, fc1 and fc2 inputs.
  const double attention_bytes = 4.0 * T * ((q + 2 * kv) + h) + 2.0 * T * (h + q);
  const double mlp_bytes = 4.0 * mlp.rows * h + 2.0 * (mlp.rows * h + mlp.activations);
  t.forward_s += forward_s;
  t.backward_s += (attention_bytes + mlp_bytes) / r.memory_bytes_per_s + 7 * r.kernel_overhead_s;
  // The attention block's share: the projection input's cast, the QKV and
  // projection output gradients' cast-transposes and their inputs' transposes.
  t.attention_forward_s += forward_s;
  t.attention_backward_s += attention_bytes / r.memory_bytes_per_s + 4 * r.kernel_overhead_s;
}

}  // namespace

PassTime megatron_layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r,
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
  if (m.mla) {
    add_mla_projections(t, m, l, r);  // latent down and up projections, RoPE (mla_kernels.h)
  } else {
    add_linear(t, T, static_cast<double>(shape.qkv_width()), h, 1, r);
    if (m.position_embedding == PositionEmbedding::kRope) {
      // rotate Q and K in place
      add_elementwise(t, 2.0 * 2.0 * T * static_cast<double>(shape.q_width() + shape.kv_width()), 1, r);
    }
  }
  add_attention_core(t, m, l, r);
  // The projection's input: the heads' outputs, n/tp·d_v (q_width() without MLA).
  add_linear(t, T, h, static_cast<double>(shape.heads) * m.value_head_dim(), 1, r);
  add_elementwise(t, dropout_add_bytes * W, 1, r);
  t.attention_forward_s = t.forward_s;
  t.attention_backward_s = t.backward_s;
  t.attention_weight_gradient_s = t.weight_gradient_s;

  // MLP block: norm, MLP (dense, or router + routed experts + shared expert), dropout-add.
  add_elementwise(t, 4.0 * W, 1, r);
  MlpFp8Shape mlp_fp8{T, T * static_cast<double>(m.ffn_hidden_size) / tp};
  if (moe_layer && m.moe) {
    const MoeConfig& e = *m.moe;
    add_linear(t, T, e.num_experts, h, 1, r);  // router logits
    // Router: softmax and top-k over the fp32 logits (read and write 4 bytes per
    // logit, twice), Megatron-Core's TopKRouter (moe/router.py).
    add_elementwise(t, 2.0 * 2.0 * 4.0 * T * e.num_experts, 2, r);
    // Each GPU's experts see T·topk·etp/tp tokens with balanced routing, as a
    // grouped GEMM over its num_experts/ep local experts; the busiest rank,
    // which the others wait for, expert_load_factor times that.
    const double expert_tokens = T * e.router_topk * l.etp / tp * e.expert_load_factor;
    const double local_experts = static_cast<double>(e.num_experts) / l.ep;
    add_expert_mlp(t, m, expert_tokens, static_cast<double>(e.ffn_hidden_size), l.etp,
                   local_experts, r);  // grouped GEMMs (expert_kernels.h)
    const double before_shared_s = t.forward_s;
    add_mlp(t, m, T, static_cast<double>(e.shared_expert_ffn_hidden_size), tp, 1, r);
    t.shared_expert_forward_s = t.forward_s - before_shared_s;
    const double shared_rows = e.shared_expert_ffn_hidden_size > 0 ? T : 0.0;
    mlp_fp8 = {expert_tokens + shared_rows,
               expert_tokens * static_cast<double>(e.ffn_hidden_size) / l.etp +
                   shared_rows * static_cast<double>(e.shared_expert_ffn_hidden_size) / tp};
    // Token permutation and un-permutation: read and write topk copies of each token.
    add_elementwise(t, 2.0 * 2.0 * 2.0 * expert_tokens * h, 2, r);
  } else {
    add_mlp(t, m, T, static_cast<double>(m.ffn_hidden_size), tp, 1, r);
  }
  add_elementwise(t, dropout_add_bytes * W, 1, r);

  if (r.fp8) add_fp8_conversions(t, shape, mlp_fp8, r);
  return t;
}

PassTime megatron_output_layer_time(const ModelConfig& m, const ParallelLayout& l,
                                    const DeviceRates& r) {
  PassTime t;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double h = static_cast<double>(m.hidden_size);
  const double V = vocab_rows_per_rank(m, l.tp);  // the padded vocabulary's shard
  add_elementwise(t, 4.0 * T * h / (l.sp ? l.tp : 1.0), 1, r);  // final norm
  // The output layer stays bf16 under --fp8: Megatron-Core builds it as a plain
  // tensor_parallel.ColumnParallelLinear, outside Transformer Engine's FP8 autocast
  // (megatron/core/models/gpt/gpt_model.py, output_layer).
  DeviceRates bf16 = r;
  bf16.fp8 = false;
  bf16.gemm_flops_per_s = r.bf16_gemm_flops_per_s;
  add_linear(t, T, V, h, 1, bf16);
  const double logits = T * V;
  const bool fused = r.cross_entropy == CrossEntropyKernel::kFused;
  t.forward_s += (fused ? kFusedCrossEntropyForwardBytesPerLogit
                        : kCrossEntropyForwardBytesPerLogit) * logits / r.memory_bytes_per_s +
                 (fused ? kFusedCrossEntropyForwardKernels : kCrossEntropyForwardKernels) *
                     r.kernel_overhead_s;
  t.backward_s += (fused ? kFusedCrossEntropyBackwardBytesPerLogit
                         : kCrossEntropyBackwardBytesPerLogit) * logits / r.memory_bytes_per_s +
                  (fused ? kFusedCrossEntropyBackwardKernels : kCrossEntropyBackwardKernels) *
                      r.kernel_overhead_s;
  return t;
}

PassTime megatron_embedding_time(const ModelConfig& m, const ParallelLayout& l,
                                 const DeviceRates& r) {
  PassTime t;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double h = static_cast<double>(m.hidden_size);
  // Gather rows (write 2·T·h), add positions, dropout; backward scatters into the
  // fp32 embedding gradient.
  add_elementwise(t, 8.0 * T * h, 2, r);
  return t;
}

double megatron_optimizer_step_time_s(double local_params, const DeviceRates& r) {
  return local_params * kOptimizerBytesPerParam / r.memory_bytes_per_s + 20 * r.kernel_overhead_s;
}

}  // namespace sextant::sim
