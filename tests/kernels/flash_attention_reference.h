// The double-precision CPU reference of flash attention (forward and
// backward), causal or not, that the flash attention tests check the kernels
// against, with the per-element error bounds the tests use. Bottom-right
// causal when kv_seq > seq (kernels/flash_attention.h): query i sees keys j <=
// i + kv_seq - seq; non-causal (shape.causal false): every key j < kv_seq. Inputs and outputs are contiguous, in the kernels' layouts:
// Q, O, dQ, dO (batch, seq, heads, head_dim), K, V, dK, dV (batch, kv_seq,
// kv_heads, head_dim), LSE (batch, heads, seq).
//
// Backward bounds (the test feeds the kernel the reference's O rounded to bf16
// and LSE rounded to fp32, and the reference uses that same bf16 O for
// delta_i = dO_i . O_i, so the backward is checked on its own): the kernel
// rounds P and dS = P (dP - delta) to bf16 before the tensor-core products
// (relative error <= 2^-9 each); everything else is fp32. dS also carries the
// fp32 error of dP_ij - delta_i, two d-term dot products that may cancel
// exactly: at most d * 2^-24 * (sum_c |dO_ic V_jc| + sum_c |dO_ic O_ic|) times P_ij. So
//   e_ij = 2^-9 |dS_ij| + P_ij d 2^-24 (sum_c |dO_ic V_jc| + |dO_ic O_ic|)
//   dV_jc: 2^-9 sum_i P_ij |dO_ic|
//   dK_jc: scale sum_i e_ij |Q_ic|,   dQ_ic: scale sum_j e_ij |K_jc|
// The atol is twice that bound (the other fp32 sums) plus 1e-6; the tests'
// rtol 1e-2 covers the final bf16 rounding (2^-9 relative).
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16.h"
#include "kernels/flash_attention.h"

namespace sextant::kernels::testing {

/// A readable test name: b2_s100_kvs300_h4_kv1_d64_qstride392 (kvs only when kv_seq != 0),
/// ending in _noncausal when causal is false.
std::string flash_attention_shape_name(const ::testing::TestParamInfo<FlashAttentionShape>& info);

/// Key/value tokens per sequence: kv_seq, or seq when it is 0.
int reference_kv_seq(const FlashAttentionShape& s);

struct AttentionReference {
  std::vector<double> out;  // (b, s, h, d)
  std::vector<double> lse;  // (b, h, s)
};

/// The last key query i sees: i + kv_seq - seq causal, kv_seq - 1 not.
int reference_last_key(const FlashAttentionShape& s, int i);

/// softmax(Q K^T / sqrt(d)) V in double, row by row, causally masked when s.causal.
AttentionReference reference_forward(const std::vector<double>& q, const std::vector<double>& k,
                                     const std::vector<double>& v, const FlashAttentionShape& s);

struct AttentionGradients {
  std::vector<double> dq, dk, dv;  // as q, k, v
  std::vector<double> dq_atol, dk_atol, dv_atol;
};

/// The attention gradients in double (causal when s.causal) from the forward's O and LSE,
/// with the per-element error bounds above. `heads_rounded`: dK and dV are
/// each query head's share rounded to bf16 before the group's sum
/// (flash_attention_backward_expands_kv_heads), one bf16 rounding of every
/// share's magnitude more.
AttentionGradients reference_backward(const std::vector<double>& q, const std::vector<double>& k,
                                      const std::vector<double>& v, const std::vector<double>& out,
                                      const std::vector<double>& lse,
                                      const std::vector<double>& dout,
                                      const FlashAttentionShape& s, bool heads_rounded = false);

/// The forward's LSE tolerance: everything is fp32 there, scores summed over
/// head_dim bf16 products and the running sum over up to kv_seq terms
/// (relative <= kv_seq * 2^-24 at worst: 6e-5 at 1000, 2.4e-4 at 4096), which
/// the logarithm turns into an absolute error of the same size; at least 1e-4.
double lse_atol(const FlashAttentionShape& s);

std::vector<Bf16> to_bf16(const std::vector<double>& values);

}  // namespace sextant::kernels::testing
