// Our engine's kernel list for one layer (engine/transformer/: attention.cc,
// mlp.cc, output_layer.cc, embedding.cc), chosen by `software: sextant-engine`,
// on the engine's own shapes (sim/core/transformer_shape.h: the widths, the
// head padding and when the norms sum the bias gradients are read from there,
// not restated). What differs from Megatron's list:
//  - residual adds ride on the GEMM that makes the branch (cuBLASLt reads the
//    residual as C) in the forward, and on the norm's backward in the backward;
//  - GELU runs in fc1's epilogue (with the bias), its backward in fc2's
//    input-gradient epilogue: no activation kernel for GPT models; each GEMM
//    is costed as the fused kernel calibrate measured (cuBLASLt picks other
//    kernels with an epilogue: fc2's DGELU ran 461 us against 331 us plain in
//    GPT-1.3B's step, reports/measurements/2026-11-23-h100-calibration-check),
//    or, without such a point, as the plain product plus the epilogue's bytes;
//  - no dropout kernels (the engine trains without dropout);
//  - the norm backward sums the bias gradients of the projections that feed
//    the residual when hidden <= 4096 (kernels/layernorm.h), so only QKV and
//    fc1 (and wider models' fc2/proj) run bias_gradient;
//  - heads of a dimension other than 64 or 128 are copied into padded
//    buffers around flash attention (4 copies forward, 4 backward);
//  - under context parallelism the attention core is the all-gather core's two
//    chunk calls (kernel_costs.h) or the ring's steps (context_ring_kernels.h);
//  - an MoE layer's MLP is the MoE block of engine_moe_kernels.cc (router,
//    routing map, a host sync, permutation, the experts' GEMMs, un-permutation);
//  - our fused cross-entropy kernel (loss and gradient in one pass);
//  - AdamW on fp32 master weights after a gradient-norm pass, the forward and
//    backward of the step replayed as one CUDA graph, and the host's per-step
//    work (token upload, loss read-back) — in engine_optimizer_step_time_s.
// Each kernel takes its time from the measured tables (kernel_costs.h); the
// roofline bytes given with it count what the kernel reads and writes.
#include <cmath>

#include "sim/compute/context_ring_kernels.h"
#include "sim/compute/engine_moe_kernels.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_kernels.h"
#include "sim/core/transformer_shape.h"

namespace sextant::sim {

namespace {

using K = ElementwiseKernel;

// One rank's widths as the engine runs them (sim/core/transformer_shape.h,
// the engine's own shape), in the doubles the cost formulas take.
struct Shapes {
  double tokens;  // T = mbs·s/cp rows of every GEMM
  double hidden, q, kv, ffn, fc1;
  bool bias, rope, layernorm, swiglu;
};

Shapes shapes_of(const TransformerShape& e) {
  Shapes s{};
  s.tokens = static_cast<double>(e.tokens());
  s.hidden = static_cast<double>(e.hidden);
  s.q = static_cast<double>(e.q_width());
  s.kv = static_cast<double>(e.kv_width());
  s.ffn = static_cast<double>(e.ffn_hidden);
  s.fc1 = static_cast<double>(e.fc1_width());
  s.bias = e.bias;
  s.rope = !e.learned_positions;
  s.layernorm = e.layernorm;
  s.swiglu = !e.gelu;
  return s;
}

// Norm forward (read x, write y: 4 bytes per element) and backward (read dy, x
// and the residual gradient, write dx: 8 bytes).
double norm_forward_s(const Shapes& s, const DeviceRates& r) {
  return elementwise_time_s(s.layernorm ? K::kLayernormForward : K::kRmsnormForward, s.tokens,
                            s.hidden, 4.0 * s.tokens * s.hidden, r);
}
double norm_backward_s(const Shapes& s, const DeviceRates& r) {
  return elementwise_time_s(s.layernorm ? K::kLayernormBackward : K::kRmsnormBackward, s.tokens,
                            s.hidden, 8.0 * s.tokens * s.hidden, r);
}
// Column sums of dy (T, width) into an fp32 bias gradient: reads 2 bytes per element.
double bias_gradient_s(const Shapes& s, double width, const DeviceRates& r) {
  return elementwise_time_s(K::kBiasGradient, s.tokens, width, 2.0 * s.tokens * width, r);
}

// The epilogues of a forward that adds the bias (when the model has one) and,
// when `residual`, the residual stream read as C (2 bytes per output element
// beyond the plain product, for the fallback where calibrate has no fused point).
LinearEpilogues bias_residual_epilogues(const Shapes& s, double out, bool residual) {
  LinearEpilogues e;
  if (residual) {
    e.forward = s.bias ? ForwardEpilogue::kBiasResidual : ForwardEpilogue::kResidual;
    e.forward_extra_bytes = 2.0 * s.tokens * out;
  } else if (s.bias) {
    e.forward = ForwardEpilogue::kBias;
  }
  return e;
}

// One linear layer's forward and backward into `t` (and the GEMM totals):
// weight gradient, bias gradient when `bias_kernel`, input gradient when
// `input_gradient`, each GEMM as the engine calls it (fused_linear_times).
// Returns the forward's time.
double linear(PassTime& t, const Shapes& s, double in, double out, bool bias_kernel,
              bool input_gradient, const DeviceRates& r, const LinearEpilogues& epilogues = {}) {
  const LinearTimes g = fused_linear_times(s.tokens, in, out, epilogues, r);
  const double forward = g.forward_s;
  t.forward_s += forward;
  t.gemm_forward_s += forward;
  const double backward = g.weight_gradient_s + (input_gradient ? g.input_gradient_s : 0.0);
  t.backward_s += backward + (bias_kernel ? bias_gradient_s(s, out, r) : 0.0);
  t.gemm_backward_s += backward;
  t.weight_gradient_s += g.weight_gradient_s;
  return forward;
}

}  // namespace

PassTime engine_layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r,
                           bool moe_layer) {
  const TransformerShape shape = transformer_shape_of(m, l);
  const Shapes s = shapes_of(shape);
  const double T = s.tokens;
  // proj's and fc2's bias gradients run as kernels of their own only where
  // the norms' backward cannot sum them.
  const bool residual_bias_kernels = shape.bias && !shape.residual_biases_from_norms();
  PassTime t;

  // Attention block. Forward: norm1, QKV (+bias epilogue), RoPE, [pad copies],
  // flash attention, projection (+bias, + residual as C). Backward: projection
  // grads, [copy], flash backward, [merge copies], RoPE backward, QKV grads
  // (+ bias_gradient), norm1 backward (adds the residual gradient).
  t.forward_s += norm_forward_s(s, r);
  t.backward_s += norm_backward_s(s, r);
  linear(t, s, s.hidden, s.q + 2 * s.kv, s.bias, true, r, bias_residual_epilogues(s, s.q + 2 * s.kv, false));
  if (s.rope) {
    // Rotates Q and K in place inside the fused QKV rows (read + write 4 bytes
    // per rotated element). Calibrate times it on multi-head rows of width W
    // (kv = q), rotating 2W/3 of each; a row rotating q + kv (GQA: kv < q)
    // moves what such a row of width 1.5·(q + kv) does.
    const double row = 1.5 * (s.q + s.kv), moved = 4.0 * T * (s.q + s.kv);
    t.forward_s += elementwise_time_s(K::kRopeForward, T, row, moved, r);
    t.backward_s += elementwise_time_s(K::kRopeBackward, T, row, moved, r);
  }
  const double heads = static_cast<double>(shape.heads);
  const double head_dim = static_cast<double>(shape.head_dim);
  const double padded = static_cast<double>(shape.attention_head_dim());  // the heads flash attention runs
  if (shape.attention_padded()) {
    // Forward: Q, K, V into padded buffers and the output back; backward: the
    // output gradient in, dQ, dK, dV back. Each reads its narrow and writes its padded rows.
    const double narrow = 2.0 * T * (s.q + 2 * s.kv), wide = narrow * padded / head_dim;
    const double out_narrow = 2.0 * T * s.q, out_wide = out_narrow * padded / head_dim;
    const double copies = untabled_memory_kernel_s(narrow + wide, r) +
                          untabled_memory_kernel_s(out_narrow + out_wide, r);
    t.forward_s += copies;
    t.backward_s += copies;
  }
  const double seq = static_cast<double>(m.seq_length);
  const double kv_heads = static_cast<double>(shape.kv_heads);
  AttentionTimes a;
  if (l.cp > 1 && l.cp_comm_type == CpCommType::kAllGather) {
    a = all_gather_attention_times(l.mbs, heads, kv_heads, seq, padded, l.cp, r);
  } else if (l.cp > 1) {
    const RingAttentionTimes ring = ring_attention_times(l.mbs, heads, kv_heads, seq, padded, l.cp, r);
    t.ring_forward = ring.forward;
    t.ring_backward = ring.backward;
    a = {ring.forward.total_s(l.cp), ring.backward.total_s(l.cp)};
  } else {
    a = attention_times(l.mbs, heads, kv_heads, seq, padded, 1, r);
  }
  t.forward_s += a.forward_s;
  t.backward_s += a.backward_s;
  // GQA at head_dim 64 with fewer (kv head, sequence, key block of 128) blocks
  // than SMs: the generic backward copies K and V out to every query head, runs
  // as multi-head (the multi-head table's case), and sums each group's dK and
  // dV (kernels/flash_attention_backward.cu, expands_kv_heads). A table
  // measured at the model's group size holds those copies already. On compute
  // capability 9.0 the engine runs its Hopper backward at head_dim 64 and 128
  // (kernels/flash_attention_backward.cu, flash_attention_backward_runs_sm90),
  // which reads each group's K and V itself and copies nothing.
  const double key_blocks = std::ceil(static_cast<double>(m.seq_length) / 128.0);
  const bool hopper_backward = r.compute_capability == 9.0 && (padded == 64 || padded == 128);
  const bool expands_kv_heads = !a.measured_at_group && !hopper_backward && padded == 64 &&
                                kv_heads < heads && kv_heads * l.mbs * key_blocks < r.sm_count;
  if (expands_kv_heads) {
    const double expanded = 2.0 * T * heads * padded, narrow = 2.0 * T * kv_heads * padded;  // bytes each
    t.backward_s += untabled_memory_kernel_s(2 * narrow + 2 * expanded, r) +  // K, V in, out per head
                    untabled_memory_kernel_s(2 * expanded + 2 * narrow, r);   // dK, dV per head in, summed out
  }
  // Flash attention's backward recomputes the scores itself and the engine
  // stores what selective recomputation would keep: nothing runs again.
  t.attention_core_forward_s = 0;
  t.attention_core_run_forward_s = a.forward_s;
  t.attention_core_backward_s = a.backward_s;
  linear(t, s, s.q, s.hidden, residual_bias_kernels, true, r, bias_residual_epilogues(s, s.hidden, true));
  t.attention_forward_s = t.forward_s;
  t.attention_backward_s = t.backward_s;
  t.attention_weight_gradient_s = t.weight_gradient_s;

  // norm2, then the MLP block, or in an MoE layer the MoE block (engine_moe_kernels.cc).
  t.forward_s += norm_forward_s(s, r);
  t.backward_s += norm_backward_s(s, r);
  if (moe_layer && shape.moe()) {
    // The launches the host issues for the attention block and norm2, as costed
    // above: forward norm1, QKV, [RoPE], [4 pad copies], attention, projection,
    // norm2; backward the projection's two gradients [+ bias_gradient], [4 copies],
    // attention [+ its K, V expansion and dK, dV sums], [RoPE], QKV's two
    // [+ bias_gradient], norm1 and norm2.
    const int rope = s.rope ? 1 : 0, pad = shape.attention_padded() ? 4 : 0, expand = expands_kv_heads ? 2 : 0;
    const DenseLaunches rest{t.forward_s, t.backward_s, 5 + rope + pad,
                             7 + (residual_bias_kernels ? 1 : 0) + pad + rope + (s.bias ? 1 : 0) + expand};
    const PassTime moe = engine_moe_block_time(shape, m.moe ? m.moe->expert_load_factor : 1.0, rest, r,
                                               m.moe ? m.moe->capacity_factor : 0.0);
    t.forward_s += moe.forward_s;
    t.backward_s += moe.backward_s;
    t.gemm_forward_s += moe.gemm_forward_s;
    t.gemm_backward_s += moe.gemm_backward_s;
    t.weight_gradient_s += moe.weight_gradient_s;
    t.full_recompute_skipped_s = moe.full_recompute_skipped_s;
    return t;
  }

  // MLP block. Forward: norm2, fc1 (+bias+GELU epilogue, or then SwiGLU), fc2
  // (+bias, + residual as C). Backward: fc2 grads (GELU backward in the
  // input-gradient epilogue), [SwiGLU backward], fc1 grads (+ bias_gradient),
  // norm2 backward. Full recomputation reruns the block without fc2 (the next
  // layer's input is stored), so fc2's forward is what it skips.
  // GELU's input (T, f) bf16: written by fc1's epilogue, read by fc2's DGELU.
  // (A GELU model without biases runs cuBLASLt's GELU_AUX epilogue, costed as
  // the measured BIAS_GELU_AUX one: the bias adds T·f reads of one row.)
  const double gelu_input_bytes = s.swiglu ? 0.0 : 2.0 * T * s.ffn;
  LinearEpilogues fc1 = bias_residual_epilogues(s, s.fc1, false);
  if (!s.swiglu) {
    fc1.forward = ForwardEpilogue::kBiasGelu;
    fc1.forward_extra_bytes = gelu_input_bytes;
  }
  linear(t, s, s.hidden, s.fc1, s.bias, true, r, fc1);
  if (s.swiglu) {
    t.forward_s += elementwise_time_s(K::kSwigluForward, T, s.ffn, 6.0 * T * s.ffn, r);
    t.backward_s += elementwise_time_s(K::kSwigluBackward, T, s.ffn, 10.0 * T * s.ffn, r);
  }
  LinearEpilogues fc2 = bias_residual_epilogues(s, s.hidden, true);
  if (!s.swiglu) {
    fc2.input_gradient = InputGradientEpilogue::kGeluBackward;
    fc2.input_gradient_extra_bytes = gelu_input_bytes;
  }
  t.full_recompute_skipped_s = linear(t, s, s.ffn, s.hidden, residual_bias_kernels, true, r, fc2);
  return t;
}

PassTime engine_output_layer_time(const ModelConfig& m, const ParallelLayout& l,
                                  const DeviceRates& r) {
  const TransformerShape shape = transformer_shape_of(m, l);
  const Shapes s = shapes_of(shape);
  const double V = static_cast<double>(shape.vocab);  // the padded vocabulary's shard
  PassTime t;
  // Final norm, logits GEMM (no bias), the fused softmax cross entropy writing
  // the logits' gradient in place (read 2 + write 2 bytes per logit, and the
  // row's max and sum from a second read: 6), then the logits GEMM's gradients
  // and the final norm's backward.
  t.forward_s += norm_forward_s(s, r);
  linear(t, s, s.hidden, V, false, true, r);
  t.forward_s += elementwise_time_s(K::kCrossEntropy, s.tokens, V, 6.0 * s.tokens * V, r);
  t.backward_s += norm_backward_s(s, r);
  return t;
}

PassTime engine_embedding_time(const ModelConfig& m, const ParallelLayout& l,
                               const DeviceRates& r) {
  const Shapes s = shapes_of(transformer_shape_of(m, l));
  PassTime t;
  // Forward: gather token rows (+ learned positions): read 2 (+2), write 2 bytes
  // per element. Backward: scatter-add dy into the fp32 tables: read 2 and
  // read-modify-write 8 bytes per element.
  t.forward_s = elementwise_time_s(K::kEmbeddingForward, s.tokens, s.hidden,
                                   6.0 * s.tokens * s.hidden, r);
  t.backward_s = elementwise_time_s(K::kEmbeddingBackward, s.tokens, s.hidden,
                                    10.0 * s.tokens * s.hidden, r);
  return t;
}

double engine_optimizer_step_time_s(double local_params, const DeviceRates& r) {
  // Gradient norm (read the fp32 gradient: 4 bytes per parameter), the clip
  // factor (one tiny kernel), and AdamW in two launches (with and without
  // weight decay) over the fp32 master weights: read master, gradient, m, v
  // (16), write master, m, v (12) and the bf16 weight (2) = 30 bytes per parameter.
  const double norm = elementwise_time_s(K::kGradNorm, 1, local_params, 4.0 * local_params, r);
  const double adam = elementwise_time_s(K::kAdamw, 1, local_params, 30.0 * local_params, r);
  // The step's one graph launch (forward and backward) and the host's work.
  return norm + adam + 2 * r.measured_kernel_gap_s + r.graph_launch_s + r.host_step_s;
}

}  // namespace sextant::sim
