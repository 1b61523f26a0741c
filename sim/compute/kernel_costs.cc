#include "sim/compute/kernel_costs.h"

#include <cmath>

#include "sim/compute/gemm_time.h"

namespace sextant::sim {

LinearTimes linear_times(double tokens, double in_width, double out_width, double batch,
                         const DeviceRates& r) {
  LinearTimes t;
  if (tokens <= 0 || in_width <= 0 || out_width <= 0) return t;
  // The tables hold single GEMMs; grouped (MoE) and batched (unfused attention) ones use the roofline.
  if (r.tables && batch == 1) {
    const LogGridTable& grid = r.fp8 ? r.tables->lookup.linear_fp8 : r.tables->lookup.linear_bf16;
    if (auto times = grid.lookup({tokens, in_width, out_width, 0}, tokens * in_width * out_width)) {
      const double f = r.compute_time_factor;
      t.forward_s = f * (*times)[0] + r.measured_kernel_gap_s;
      t.input_gradient_s = f * (*times)[1] + r.measured_kernel_gap_s;
      t.weight_gradient_s = f * (*times)[2] + r.measured_kernel_gap_s;
      return t;
    }
  }
  const double f = r.compute_time_factor;
  t.forward_s = f * gemm_time_s({tokens, out_width, in_width, batch, false}, r.gemm_flops_per_s, r);
  t.input_gradient_s =
      f * gemm_time_s({tokens, in_width, out_width, batch, false}, r.gemm_flops_per_s, r);
  t.weight_gradient_s =
      f * gemm_time_s({in_width, out_width, tokens, batch, true}, r.gemm_flops_per_s, r);
  return t;
}

LinearTimes fused_linear_times(double tokens, double in_width, double out_width,
                               const LinearEpilogues& e, const DeviceRates& r) {
  LinearTimes t = linear_times(tokens, in_width, out_width, 1, r);
  if (tokens <= 0 || in_width <= 0 || out_width <= 0) return t;
  const bool fused_forward = e.forward != ForwardEpilogue::kNone;
  const bool fused_input_gradient = e.input_gradient != InputGradientEpilogue::kNone;
  if (r.tables && !r.fp8 && (fused_forward || fused_input_gradient)) {
    if (auto times = r.tables->lookup.linear_bf16_epilogues.lookup({tokens, in_width, out_width, 0},
                                                                    tokens * in_width * out_width)) {
      // Columns: bias, residual, bias + residual, bias + GELU, GELU backward.
      const double f = r.compute_time_factor;
      if (fused_forward)
        t.forward_s = f * (*times)[static_cast<int>(e.forward) - 1] + r.measured_kernel_gap_s;
      if (fused_input_gradient) t.input_gradient_s = f * (*times)[4] + r.measured_kernel_gap_s;
      return t;
    }
  }
  // The plain product plus the epilogue's extra traffic at the HBM rate.
  t.forward_s += r.compute_time_factor * e.forward_extra_bytes / r.memory_bytes_per_s;
  t.input_gradient_s += r.compute_time_factor * e.input_gradient_extra_bytes / r.memory_bytes_per_s;
  return t;
}

AttentionTimes attention_times(double batch, double heads, double kv_heads, double seq, double head_dim,
                               double cp, const DeviceRates& r) {
  AttentionTimes t;
  const double f = r.compute_time_factor;
  if (r.tables && cp == 1) {
    // The call's own group size first (a GQA table only where the profile measured
    // that group), then the multi-head table: a group size the profile did not
    // measure, or a shape below its table's grid, is costed as multi-head
    // attention, as every GQA call was before profiles had GQA rows.
    const int group = attention_group_size(heads, kv_heads);
    const auto& tables = r.tables->lookup.attention;
    for (const int g : {group, 1}) {
      const auto table = tables.find(g);
      if (table == tables.end()) continue;
      if (auto times = table->second.lookup({batch, heads, seq, head_dim}, batch * heads * seq * seq * head_dim)) {
        t.forward_s = f * (*times)[0] + r.measured_kernel_gap_s;
        t.backward_s = f * (*times)[1] + r.measured_kernel_gap_s;
        t.measured_at_group = g > 1;
        return t;
      }
    }
  }
  // Causal flash attention does half of the 4·s²·d FLOPs per head and sequence;
  // its backward recomputes the scores: 5 GEMMs to the forward's 2, so 2.5×
  // (Dao 2023, FlashAttention-2, Sec. 3). Context parallelism splits the work evenly.
  // Few query tiles (batch·heads·s/128 per GPU) leave SMs idle: the rate is
  // scaled by u/(u + u_half), fitted on our H100 cuDNN attention sweep.
  const double forward_flops = batch * heads * 4.0 * seq * seq * head_dim / 2.0 / cp;
  const double tiles = batch * heads * seq / cp / 128.0;
  const double occupancy = tiles / (tiles + r.attention_half_efficiency_tiles);
  t.forward_s = f * forward_flops / (r.attention_forward_flops_per_s * occupancy) + r.kernel_overhead_s;
  t.backward_s =
      f * 2.5 * forward_flops / (r.attention_backward_flops_per_s * occupancy) + r.kernel_overhead_s;
  return t;
}

AttentionTimes attention_call_times(double pairs, double heads, double kv_heads, double head_dim,
                                    const DeviceRates& r) {
  // A causal square call of n tokens has n²/2 pairs: n = sqrt(2·pairs).
  return attention_times(1, heads, kv_heads, std::sqrt(2 * pairs), head_dim, 1, r);
}

AttentionTimes all_gather_attention_times(double batch, double heads, double kv_heads, double seq,
                                          double head_dim, double cp, const DeviceRates& r) {
  if (cp <= 1) return attention_times(batch, heads, kv_heads, seq, head_dim, 1, r);
  const double chunk = seq / (2 * cp);
  AttentionTimes t;
  t.measured_at_group = true;
  // Chunk 0: a square causal call, c²/2 pairs; chunk 2cp−1: c·2cp·c − c²/2 pairs.
  for (const double pairs : {chunk * chunk / 2, chunk * chunk * (2 * cp - 0.5)}) {
    const AttentionTimes call = attention_call_times(pairs, heads, kv_heads, head_dim, r);
    t.forward_s += batch * call.forward_s;
    t.backward_s += batch * call.backward_s;
    t.measured_at_group = t.measured_at_group && call.measured_at_group;
  }
  return t;
}

double elementwise_time_s(ElementwiseKernel kernel, double rows, double width,
                          double roofline_bytes, const DeviceRates& r) {
  if (rows <= 0 || width <= 0) return 0;
  const double f = r.compute_time_factor;
  if (r.tables) {
    const LogGridTable& grid = r.tables->lookup.elementwise[static_cast<std::size_t>(kernel)];
    if (auto time = grid.lookup({rows, width, 0, 0}, rows * width))
      return f * (*time)[0] + r.measured_kernel_gap_s;
  }
  return f * roofline_bytes / r.memory_bytes_per_s + r.kernel_overhead_s;
}

double untabled_memory_kernel_s(double bytes, const DeviceRates& r) {
  return r.compute_time_factor * bytes / r.memory_bytes_per_s + r.measured_kernel_gap_s;
}

}  // namespace sextant::sim
