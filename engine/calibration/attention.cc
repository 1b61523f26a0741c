#include "engine/calibration/attention.h"

#include <vector>

#include "kernels/flash_attention.h"

namespace sextant::engine::calibration {

namespace {

using kernels::Bf16;

kernels::FlashAttentionShape kernel_shape(const AttentionShape& s) {
  kernels::FlashAttentionShape k;
  k.batch = s.batch;
  k.seq = s.seq;
  k.heads = s.heads;
  k.kv_heads = s.kv_heads;
  k.head_dim = s.head_dim;
  return k;
}

// Elements of one (b, s, heads, d) tensor: Q, O, dO, dQ with `heads` = the query heads,
// K, V, dK, dV with the key/value heads.
std::size_t activation_elements(const AttentionShape& s, int heads) {
  return static_cast<std::size_t>(s.batch) * s.seq * heads * s.head_dim;
}

// One set: q, out, dout, dq (b, s, heads, d), k, v, dk, dv (b, s, kv_heads, d) bf16
// and lse (b, heads, s) fp32.
std::size_t set_bytes(const AttentionShape& s) {
  return 4 * aligned_bytes(activation_elements(s, s.heads) * sizeof(Bf16)) +
         4 * aligned_bytes(activation_elements(s, s.kv_heads) * sizeof(Bf16)) +
         aligned_bytes(static_cast<std::size_t>(s.batch) * s.heads * s.seq * sizeof(float));
}

struct AttentionSet {
  Bf16 *q, *k, *v, *out, *dout, *dq, *dk, *dv;
  float* lse;
};

}  // namespace

std::size_t attention_scratch_bytes(const AttentionShape& shape, std::size_t l2_bytes) {
  return set_bytes(shape) * static_cast<std::size_t>(rotations_for(set_bytes(shape), l2_bytes)) +
         aligned_bytes(kernels::flash_attention_backward_workspace_bytes(kernel_shape(shape)));
}

double attention_estimate_s(const AttentionShape& s) {
  // The FLOPs do not depend on kv_heads: every query head still scores every key.
  const double forward_flops = 4.0 * s.batch * s.heads * static_cast<double>(s.seq) * s.seq * s.head_dim / 2.0;
  return 3.5 * forward_flops / 400e12 + 10e-6;
}

AttentionPoint measure_attention(const AttentionShape& shape, const MeasurementContext& ctx) {
  const kernels::FlashAttentionShape k = kernel_shape(shape);
  const int rotations = rotations_for(set_bytes(shape), ctx.l2_bytes);
  ctx.scratch->reset();
  const std::size_t workspace_bytes = kernels::flash_attention_backward_workspace_bytes(k);
  void* workspace = ctx.scratch->take(workspace_bytes);
  std::vector<AttentionSet> sets;
  const std::size_t query_elements = activation_elements(shape, shape.heads);
  const std::size_t kv_elements = activation_elements(shape, shape.kv_heads);
  for (int r = 0; r < rotations; ++r) {
    AttentionSet a;
    for (Bf16** p : {&a.q, &a.out, &a.dout, &a.dq}) *p = ctx.scratch->take_as<Bf16>(query_elements);
    for (Bf16** p : {&a.k, &a.v, &a.dk, &a.dv}) *p = ctx.scratch->take_as<Bf16>(kv_elements);
    a.lse = ctx.scratch->take_as<float>(static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq);
    sets.push_back(a);
  }
  AttentionPoint p;
  p.batch = shape.batch;
  p.heads = shape.heads;
  p.kv_heads = shape.kv_heads;
  p.seq = shape.seq;
  p.head_dim = shape.head_dim;
  // The forward's warm-up writes every set's out and lse, which the backward reads.
  p.forward_s = median_seconds_in_graph(
      [&](int set) {
        const AttentionSet& a = sets[static_cast<std::size_t>(set)];
        kernels::flash_attention_forward(a.out, a.lse, a.q, a.k, a.v, k, ctx.stream);
      },
      rotations, ctx);
  p.backward_s = median_seconds_in_graph(
      [&](int set) {
        const AttentionSet& a = sets[static_cast<std::size_t>(set)];
        kernels::flash_attention_backward(a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, k, workspace,
                                          workspace_bytes, ctx.stream);
      },
      rotations, ctx);
  return p;
}

}  // namespace sextant::engine::calibration
