// Non-causal flash attention (FlashAttentionShape::causal false,
// kernels/flash_attention.h; its shapes' forward and backward against the
// reference are tests/kernels/flash_attention_kv_seq_test.cc's NonCausalShapes):
// the identity
// context parallelism's ring attention relies on (Liu et al. 2023, Sec. 3;
// Megatron-Core's causally balanced split): causal attention of the second
// half of a (2c)-token sequence is the LSE merge of its non-causal attention
// to the first c keys and its causal attention to the last c
// (kernels::merge_attention_partial), and its gradients split over the two key
// sets exactly when both calls get the merged O and LSE.
// The double-precision reference and its bounds:
// tests/kernels/flash_attention_reference.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/attention_merge.h"
#include "kernels/flash_attention.h"
#include "tests/kernels/flash_attention_operands.h"
#include "tests/kernels/flash_attention_reference.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::add_bound;
using testing::all_close;
using testing::AttentionGradients;
using testing::AttentionReference;
using testing::DeviceBuffer;
using testing::kv_elems;
using testing::lse_atol;
using testing::lse_elems;
using testing::Operands;
using testing::out_atol;
using testing::q_elems;
using testing::random_operands;
using testing::reference_backward;
using testing::reference_forward;
using testing::slice;
using testing::to_bf16;
using testing::to_double;

FlashAttentionShape non_causal(int batch, int seq, int kv_seq, int heads, int kv_heads, int head_dim) {
  return {batch, seq, kv_seq, heads, kv_heads, head_dim, 0, 0, false};
}

// The ring identity for one sequence of 2c tokens: rows c..2c of causal
// attention over all 2c keys (the shape seq c, kv_seq 2c, causal: bottom-right)
// from two calls, A = rows c..2c against keys 0..c non-causal, B = the same
// rows against keys c..2c causal (square), merged by their LSEs.
struct RingCase {
  int chunk = 0, heads = 0, kv_heads = 0, head_dim = 0;
  FlashAttentionShape whole() const { return {1, chunk, 2 * chunk, heads, kv_heads, head_dim}; }
  FlashAttentionShape earlier_keys() const {
    return {1, chunk, chunk, heads, kv_heads, head_dim, 0, 0, false};
  }
  FlashAttentionShape own_keys() const { return {1, chunk, chunk, heads, kv_heads, head_dim}; }
};

std::string ring_case_name(const ::testing::TestParamInfo<RingCase>& info) {
  const auto& c = info.param;
  std::string name = "c";
  name += std::to_string(c.chunk);
  name += "_h" + std::to_string(c.heads);
  name += "_kv" + std::to_string(c.kv_heads);
  name += "_d" + std::to_string(c.head_dim);
  return name;
}

class FlashAttentionRingIdentityTest : public testing::GpuTestWithParam<RingCase> {};

// Each call's O is within the forward tolerance of its exact partial result
// (rtol 1e-2, atol 2^-8 max|V|) and its LSE within lse_atol; the merge weights
// exp(L_X - L) sum to 1, so the merged O is within the larger of the two
// bounds plus the weights' error (|dw| <= 2 lse_atol, times max|V|), and the
// merged LSE within lse_atol of the exact one. Checked with twice that.
TEST_P(FlashAttentionRingIdentityTest, MergedForwardIsTheCausalRows) {
  const RingCase rc = GetParam();
  const FlashAttentionShape whole = rc.whole(), a = rc.earlier_keys(), b = rc.own_keys();
  ASSERT_EQ(flash_attention_unsupported_reason(a), "");
  ASSERT_EQ(flash_attention_unsupported_reason(b), "");
  const Operands x = random_operands(whole, rng());
  const std::size_t kv_half = kv_elems(a);
  DeviceBuffer<Bf16> d_q(x.q), d_k(x.k), d_v(x.v), d_out(q_elems(a));
  DeviceBuffer<float> d_lse(lse_elems(a));
  DeviceBuffer<float> d_acc(q_elems(a)), d_acc_lse(lse_elems(a));
  const AttentionMergeShape merge{rc.chunk, rc.heads, rc.head_dim};

  flash_attention_forward(d_out.get(), d_lse.get(), d_q.get(), d_k.get(), d_v.get(), a, nullptr);
  merge_attention_partial(d_acc.get(), d_acc_lse.get(), d_out.get(), d_lse.get(), merge, true, nullptr);
  flash_attention_forward(d_out.get(), d_lse.get(), d_q.get(), d_k.get() + kv_half,
                          d_v.get() + kv_half, b, nullptr);
  merge_attention_partial(d_acc.get(), d_acc_lse.get(), d_out.get(), d_lse.get(), merge, false, nullptr);

  const auto vd = to_double(x.v);
  const AttentionReference ref = reference_forward(to_double(x.q), to_double(x.k), vd, whole);
  const double atol = 2 * (out_atol(vd) + 2 * lse_atol(whole) * testing::max_abs(vd));
  EXPECT_TRUE(all_close(to_double(d_acc.download()), ref.out, 2e-2, atol)) << "out";
  EXPECT_TRUE(all_close(to_double(d_acc_lse.download()), ref.lse, 0.0, 2 * lse_atol(whole)))
      << "lse";
}

// Both calls get the whole's O (bf16) and LSE, as the ring's backward does:
// dQ is the sum of the two calls' dQ, dK and dV of keys 0..c are A's, of keys
// c..2c B's. Each call is within its reference bound of its exact share, so the
// sum is within the sum of the bounds of the whole's exact gradient.
TEST_P(FlashAttentionRingIdentityTest, BackwardSplitsOverTheKeySets) {
  const RingCase rc = GetParam();
  const FlashAttentionShape whole = rc.whole(), a = rc.earlier_keys(), b = rc.own_keys();
  const Operands x = random_operands(whole, rng());
  const std::size_t kv_half = kv_elems(a);
  const auto qd = to_double(x.q), kd = to_double(x.k), vd = to_double(x.v);
  const auto doutd = to_double(x.dout);
  const AttentionReference fwd = reference_forward(qd, kd, vd, whole);
  const std::vector<Bf16> out = to_bf16(fwd.out);
  const std::vector<float> lse(fwd.lse.begin(), fwd.lse.end());
  const auto outd = to_double(out), lsed = to_double(lse);
  DeviceBuffer<Bf16> d_q(x.q), d_k(x.k), d_v(x.v), d_dout(x.dout), d_out(out);
  DeviceBuffer<float> d_lse(lse);

  std::vector<double> dq_sum(q_elems(a), 0.0), dk(kv_elems(whole)), dv(kv_elems(whole));
  std::vector<double> dq_bound(dq_sum.size(), 0.0), dk_bound(dk.size(), 0.0),
      dv_bound(dv.size(), 0.0);
  for (int part = 0; part < 2; ++part) {
    const FlashAttentionShape s = part == 0 ? a : b;
    const std::size_t first_key = part == 0 ? 0 : kv_half;
    DeviceBuffer<Bf16> d_dq(q_elems(s)), d_dk(kv_elems(s)), d_dv(kv_elems(s));
    const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(s);
    ASSERT_GT(ws_bytes, 0u);
    DeviceBuffer<char> d_ws(ws_bytes);
    flash_attention_backward(d_dq.get(), d_dk.get(), d_dv.get(), d_dout.get(), d_q.get(),
                             d_k.get() + first_key, d_v.get() + first_key, d_out.get(),
                             d_lse.get(), s, d_ws.get(), ws_bytes, nullptr);
    const auto dq_part = to_double(d_dq.download());
    for (std::size_t i = 0; i < dq_part.size(); ++i) dq_sum[i] += dq_part[i];
    const auto dk_part = to_double(d_dk.download()), dv_part = to_double(d_dv.download());
    std::copy(dk_part.begin(), dk_part.end(), dk.begin() + first_key);
    std::copy(dv_part.begin(), dv_part.end(), dv.begin() + first_key);
    const AttentionGradients g = reference_backward(
        qd, slice(kd, first_key, kv_half), slice(vd, first_key, kv_half), outd, lsed, doutd, s,
        flash_attention_backward_expands_kv_heads(s));
    add_bound(dq_bound, 0, g.dq_atol, g.dq);
    add_bound(dk_bound, first_key, g.dk_atol, g.dk);
    add_bound(dv_bound, first_key, g.dv_atol, g.dv);
  }
  const AttentionGradients exact = reference_backward(qd, kd, vd, outd, lsed, doutd, whole);
  EXPECT_TRUE(all_close(dq_sum, exact.dq, 0.0, dq_bound)) << "dq";
  EXPECT_TRUE(all_close(dk, exact.dk, 0.0, dk_bound)) << "dk";
  EXPECT_TRUE(all_close(dv, exact.dv, 0.0, dv_bound)) << "dv";
}

// {chunk, heads, kv_heads, head_dim}: chunks of 128 at head_dim 128 run the
// Hopper kernels on an H100/H200 for both calls; 100 leaves partial blocks;
// GQA and MHA.
INSTANTIATE_TEST_SUITE_P(Cases, FlashAttentionRingIdentityTest,
                         ::testing::Values(RingCase{128, 4, 2, 128}, RingCase{100, 4, 1, 64},
                                           RingCase{256, 4, 4, 64}, RingCase{100, 8, 8, 128}),
                         ring_case_name);

// The argument checks run before any CUDA call, so these need no GPU.
TEST(FlashAttentionNonCausalArguments, AnyPositiveKvSeqIsAccepted) {
  EXPECT_EQ(flash_attention_unsupported_reason(non_causal(2, 100, 99, 4, 1, 64)), "");
  EXPECT_EQ(flash_attention_unsupported_reason(non_causal(2, 100, 1, 4, 1, 128)), "");
  EXPECT_EQ(flash_attention_unsupported_reason(non_causal(2, 100, 0, 4, 1, 64)), "");
  EXPECT_EQ(flash_attention_unsupported_reason(non_causal(2, 100, -1, 4, 1, 64)),
            "kv_seq (-1) must be 0 (= seq) or positive (non-causal)");
  EXPECT_EQ(flash_attention_unsupported_reason(non_causal(1, 64, 8388481, 4, 4, 64)),
            "kv_seq (8388481) must be at most 8388480");
  // The same shape, causal: kv_seq below seq is refused.
  EXPECT_EQ(flash_attention_unsupported_reason({2, 100, 99, 4, 1, 64}),
            "kv_seq (99) must be 0 (= seq) or at least seq (100)");
}

TEST(FlashAttentionNonCausalArguments, WorkspaceCoversKvSeqBelowSeq) {
  // (2, 300, 4, 64) fp32 dQ plus (2, 4, 300) fp32 delta: queries only, the
  // generic kernel's; the Hopper one's is larger: dQ, delta and LSE over
  // 2 * 4 * 384 rows (three 128-query blocks at head_dim 64).
  const std::size_t queries = (2 * 300 * 4 * 64 + 2 * 4 * 300) * sizeof(float);
  EXPECT_EQ(flash_attention_backward_workspace_bytes(non_causal(2, 300, 70, 4, 4, 64)),
            std::size_t{2} * 4 * 384 * (64 + 2) * sizeof(float));
  // GQA adds to the generic kernel's part K, V, dK and dV expanded to the 4
  // query heads over kv_seq = 70, after the fp32 part rounded up to 256 bytes
  // (910848 bytes, above the Hopper kernel's 811008).
  const std::size_t aligned = (queries + 255) / 256 * 256;
  EXPECT_EQ(flash_attention_backward_workspace_bytes(non_causal(2, 300, 70, 4, 1, 64)),
            aligned + 4 * (2 * 70 * 4 * 64) * sizeof(Bf16));
  // head_dim 128: the larger of the generic kernel's and the Hopper one's
  // (dQ, delta and LSE over 320 padded rows).
  EXPECT_EQ(flash_attention_backward_workspace_bytes(non_causal(2, 300, 70, 4, 1, 128)),
            std::size_t{2} * 4 * 320 * (128 + 2) * sizeof(float));
}

}  // namespace
}  // namespace sextant::kernels
