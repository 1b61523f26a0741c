// Flash attention with more keys than queries (kv_seq > seq, bottom-right
// causal, kernels/flash_attention.h), and non-causal with kv_seq below, equal
// to or above seq (causal false: every query sees every key): forward and backward against the
// double-precision reference (tests/kernels/flash_attention_reference.h, whose
// bounds and the forward tolerances of tests/kernels/flash_attention_test.cc
// apply unchanged), the context-parallel identity that context parallelism's
// all-gather attention relies on (Llama 3, Dubey et al. 2024, Sec. 3.3.2), and
// kv_seq == seq matching kv_seq == 0 bit for bit.
//
// Q is a column slice of rows as wide as the fused QKV rows (q_row_stride), as
// the engine passes it; K and V are contiguous (kv_row_stride 0), as the
// gathered keys and values are, or (some non-causal shapes) slices too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/flash_attention.h"
#include "tests/kernels/flash_attention_operands.h"
#include "tests/kernels/flash_attention_reference.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::AttentionGradients;
using testing::AttentionReference;
using testing::DeviceBuffer;
using testing::lse_atol;
using testing::reference_backward;
using testing::reference_forward;
using testing::reference_kv_seq;
using testing::to_bf16;
using testing::to_double;
using testing::add_bound;
using testing::kFill;
using testing::kv_elems;
using testing::kv_rows;
using testing::lse_elems;
using testing::lse_rows;
using testing::Operands;
using testing::out_atol;
using testing::q_elems;
using testing::query_rows;
using testing::random_operands;
using testing::slice;
using testing::StridedRows;

class FlashAttentionKvSeqTest : public testing::GpuTestWithParam<FlashAttentionShape> {};

TEST_P(FlashAttentionKvSeqTest, ForwardMatchesReference) {
  const FlashAttentionShape s = GetParam();
  ASSERT_EQ(flash_attention_unsupported_reason(s), "");
  const StridedRows rows = query_rows(s), k_rows = kv_rows(s);
  const Operands x = random_operands(s, rng());
  DeviceBuffer<Bf16> d_q(rows.widen(x.q)), d_k(k_rows.widen(x.k)), d_v(k_rows.widen(x.v));
  DeviceBuffer<Bf16> d_out(q_elems(s));
  DeviceBuffer<float> d_lse(lse_elems(s));

  flash_attention_forward(d_out.get(), d_lse.get(), d_q.get(), d_k.get(), d_v.get(), s, nullptr);

  const auto vd = to_double(x.v);
  const AttentionReference ref = reference_forward(to_double(x.q), to_double(x.k), vd, testing::contiguous(s));
  EXPECT_TRUE(all_close(to_double(d_out.download()), ref.out, 1e-2, out_atol(vd))) << "out";
  EXPECT_TRUE(all_close(to_double(d_lse.download()), ref.lse, 0.0, lse_atol(s))) << "lse";
}

TEST_P(FlashAttentionKvSeqTest, BackwardMatchesReference) {
  const FlashAttentionShape s = GetParam();
  ASSERT_EQ(flash_attention_unsupported_reason(s), "");
  const StridedRows rows = query_rows(s), k_rows = kv_rows(s);
  const Operands x = random_operands(s, rng());
  const FlashAttentionShape contiguous = testing::contiguous(s);
  const auto qd = to_double(x.q), kd = to_double(x.k), vd = to_double(x.v);
  const AttentionReference fwd = reference_forward(qd, kd, vd, contiguous);
  const std::vector<Bf16> out = to_bf16(fwd.out);
  const std::vector<float> lse(fwd.lse.begin(), fwd.lse.end());
  DeviceBuffer<Bf16> d_q(rows.widen(x.q)), d_k(k_rows.widen(x.k)), d_v(k_rows.widen(x.v));
  DeviceBuffer<Bf16> d_dout(x.dout), d_out(out);
  // The gradients' rows start as all kFill: the kernels must write every head
  // column and leave the rest.
  DeviceBuffer<Bf16> d_dq(rows.widen(std::vector<Bf16>(q_elems(s), kFill)));
  DeviceBuffer<Bf16> d_dk(k_rows.widen(std::vector<Bf16>(kv_elems(s), kFill)));
  DeviceBuffer<Bf16> d_dv(k_rows.widen(std::vector<Bf16>(kv_elems(s), kFill)));
  DeviceBuffer<float> d_lse(lse);
  const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(s);
  ASSERT_GT(ws_bytes, 0u);
  DeviceBuffer<char> d_ws(ws_bytes);

  flash_attention_backward(d_dq.get(), d_dk.get(), d_dv.get(), d_dout.get(), d_q.get(), d_k.get(),
                           d_v.get(), d_out.get(), d_lse.get(), s, d_ws.get(), ws_bytes, nullptr);

  const AttentionGradients g = reference_backward(qd, kd, vd, to_double(out), to_double(lse),
                                                  to_double(x.dout), contiguous,
                                                  flash_attention_backward_expands_kv_heads(s));
  const std::vector<Bf16> dq = d_dq.download(), dk = d_dk.download(), dv = d_dv.download();
  EXPECT_TRUE(all_close(to_double(k_rows.narrow(dv)), g.dv, 1e-2, g.dv_atol)) << "dv";
  EXPECT_TRUE(all_close(to_double(k_rows.narrow(dk)), g.dk, 1e-2, g.dk_atol)) << "dk";
  EXPECT_TRUE(all_close(to_double(rows.narrow(dq)), g.dq, 1e-2, g.dq_atol)) << "dq";
  EXPECT_EQ(rows.changed_padding(dq), 0u);
  EXPECT_EQ(k_rows.changed_padding(dk), 0u);
  EXPECT_EQ(k_rows.changed_padding(dv), 0u);
}

// {batch, seq, kv_seq, heads, kv_heads, head_dim, q_row_stride}. Offsets kv_seq
// - seq: 200 and 384 (seq 100 ends in a partial query block and 200 is no whole
// number of 64- or 128-key blocks: two key blocks straddle each query block's
// diagonal; 384 is three 128-key blocks, which the Hopper forward takes),
// 64 (whole 64-key blocks only). kv_heads 1, 2 are GQA, 4 MHA; on an H100 or
// H200 every shape runs the Hopper backward (the forward only at offset 384).
// On other devices, GQA at head_dim 64 with few (kv head, sequence, key block)
// blocks runs with K and V expanded to every query head; 66 sequences at 2 kv
// heads make 132 blocks (an H100's or H200's SM count) and keep the kernel's
// own walk over each group. q_row_stride: the fused QKV width (heads + 2
// kv_heads) head_dim, plus 8 padding columns where it is not 0 mod 128.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionKvSeqTest,
                         ::testing::Values(FlashAttentionShape{2, 100, 300, 4, 1, 64, 392},
                                           FlashAttentionShape{2, 100, 300, 4, 2, 128, 1032},
                                           FlashAttentionShape{2, 128, 512, 4, 4, 128, 1536},
                                           FlashAttentionShape{2, 128, 512, 4, 1, 128},
                                           FlashAttentionShape{2, 128, 512, 4, 4, 64, 768},
                                           FlashAttentionShape{66, 64, 128, 4, 2, 64, 520},
                                           FlashAttentionShape{1, 1, 70, 4, 2, 64}),
                         testing::flash_attention_shape_name);

// The Hopper backward at head_dim 64 walks 128-query blocks against 128-key
// blocks: offsets that are odd multiples of 64 put the diagonal through the
// middle of a query block, so a key block's walk starts at a query block that
// its second warpgroup's keys see only in part. Offsets 64 (seq 200: a partial
// last query block), 192 (seq 130 = 128 + 2, GQA group 4), 320 (seq 300, GQA
// group 8) and 192 for one query row.
INSTANTIATE_TEST_SUITE_P(HopperHeadDim64, FlashAttentionKvSeqTest,
                         ::testing::Values(FlashAttentionShape{2, 200, 264, 4, 2, 64, 512},
                                           FlashAttentionShape{1, 130, 322, 8, 2, 64, 768},
                                           FlashAttentionShape{1, 300, 620, 16, 2, 64, 1280},
                                           FlashAttentionShape{1, 1, 193, 4, 1, 64}),
                         testing::flash_attention_shape_name);

FlashAttentionShape non_causal(int batch, int seq, int kv_seq, int heads, int kv_heads, int head_dim,
                               int q_row_stride = 0, int kv_row_stride = 0) {
  return {batch, seq, kv_seq, heads, kv_heads, head_dim, q_row_stride, kv_row_stride, false};
}

// Non-causal: kv_seq below, equal to and above seq, with partial query blocks
// (seq 100, 300) and partial key blocks (kv_seq 70, 300: no whole number of 64-
// or 128-key blocks), whole blocks (256 x 128, 512 x 512), one key or one
// query. kv_heads 1, 2, 4 of 4 or 8 heads (GQA) and MHA. Both head_dims run
// the Hopper kernels on an H100 or H200 (forward and backward take every
// non-causal shape); on other devices the generic backward, at head_dim 64
// with GQA's few (kv head, sequence, key block) blocks expanded to every query
// head. Row strides: the fused QKV width (heads + 2 kv_heads) head_dim (+ 8
// where it is not 0 mod 128), for Q and for K and V. The last three are for
// the Hopper backward at head_dim 64 (128-query steps): kv_seq 190 and 450 end
// in partial 128-key blocks (below seq, GQA group 4; above it, group 8), and
// one query row against 300 keys.
INSTANTIATE_TEST_SUITE_P(NonCausalShapes, FlashAttentionKvSeqTest,
                         ::testing::Values(non_causal(2, 100, 300, 4, 1, 64, 392, 392),
                                           non_causal(2, 300, 70, 4, 2, 64),
                                           non_causal(2, 300, 70, 8, 2, 128, 1536, 1536),
                                           non_causal(2, 100, 300, 4, 4, 128),
                                           non_causal(1, 256, 128, 8, 4, 128),
                                           non_causal(3, 128, 128, 4, 4, 64, 768, 768),
                                           non_causal(2, 512, 512, 4, 1, 128, 768, 768),
                                           non_causal(1, 1, 70, 4, 2, 64),
                                           non_causal(1, 70, 1, 4, 4, 128),
                                           non_causal(2, 200, 190, 8, 2, 64),
                                           non_causal(1, 130, 450, 16, 2, 64),
                                           non_causal(1, 1, 300, 4, 4, 64)),
                         testing::flash_attention_shape_name);

// kv_seq == seq is the square case: the same kernels, the same results, bit for
// bit. dQ is summed with atomics (its last bits may differ from run to run), so
// only the deterministic O, LSE, dK and dV are compared.
class FlashAttentionKvSeqEqualsSeqTest : public testing::GpuTestWithParam<FlashAttentionShape> {};

std::size_t differing_bits(const std::vector<Bf16>& a, const std::vector<Bf16>& b) {
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differing += a[i].bits != b[i].bits;
  return differing;
}
std::size_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    differing += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]);
  return differing;
}

TEST_P(FlashAttentionKvSeqEqualsSeqTest, MatchesKvSeqZeroBitForBit) {
  FlashAttentionShape zero = GetParam();
  zero.kv_seq = 0;
  FlashAttentionShape equal = zero;
  equal.kv_seq = zero.seq;
  const StridedRows rows = query_rows(zero);
  const Operands x = random_operands(zero, rng());
  const std::vector<Bf16> q = rows.widen(x.q);
  DeviceBuffer<Bf16> d_q(q), d_k(x.k), d_v(x.v), d_dout(x.dout), d_out(q_elems(zero));
  DeviceBuffer<Bf16> d_dq(q.size()), d_dk(kv_elems(zero)), d_dv(kv_elems(zero));
  DeviceBuffer<float> d_lse(lse_elems(zero));
  ASSERT_EQ(flash_attention_backward_workspace_bytes(equal),
            flash_attention_backward_workspace_bytes(zero));
  const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(zero);
  DeviceBuffer<char> d_ws(ws_bytes);
  struct Results {
    std::vector<Bf16> out, dk, dv;
    std::vector<float> lse;
  };
  auto run = [&](const FlashAttentionShape& s) {
    flash_attention_forward(d_out.get(), d_lse.get(), d_q.get(), d_k.get(), d_v.get(), s, nullptr);
    flash_attention_backward(d_dq.get(), d_dk.get(), d_dv.get(), d_dout.get(), d_q.get(),
                             d_k.get(), d_v.get(), d_out.get(), d_lse.get(), s, d_ws.get(),
                             ws_bytes, nullptr);
    return Results{d_out.download(), d_dk.download(), d_dv.download(), d_lse.download()};
  };
  const Results a = run(zero);
  const Results b = run(equal);
  EXPECT_EQ(differing_bits(a.out, b.out), 0u) << "out";
  EXPECT_EQ(differing_bits(a.lse, b.lse), 0u) << "lse";
  EXPECT_EQ(differing_bits(a.dk, b.dk), 0u) << "dk";
  EXPECT_EQ(differing_bits(a.dv, b.dv), 0u) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionKvSeqEqualsSeqTest,
                         ::testing::Values(FlashAttentionShape{2, 200, 0, 4, 1, 64, 392},
                                           FlashAttentionShape{2, 200, 0, 4, 2, 128, 1032},
                                           FlashAttentionShape{1, 256, 0, 4, 4, 128}),
                         testing::flash_attention_shape_name);

// The context-parallel identity: causal attention over `tokens` positions
// computed once, and again as 2 cp chunk calls of c = tokens / (2 cp) queries,
// chunk k against keys [0, (k + 1) c) (seq c, kv_seq (k + 1) c, Q, dQ, O, dO
// the chunk's rows of the full buffers, K and V the full ones' first rows).
struct ContextParallelCase {
  int tokens = 0, cp = 0, heads = 0, kv_heads = 0, head_dim = 0, q_row_stride = 0;
  int chunk() const { return tokens / (2 * cp); }
  FlashAttentionShape full() const {
    return {1, tokens, 0, heads, kv_heads, head_dim, q_row_stride, 0};
  }
  FlashAttentionShape chunk_shape(int k) const {
    return {1, chunk(), (k + 1) * chunk(), heads, kv_heads, head_dim, q_row_stride, 0};
  }
};

std::string case_name(const ::testing::TestParamInfo<ContextParallelCase>& info) {
  const auto& c = info.param;
  std::string name = "s";
  name += std::to_string(c.tokens);
  name += "_cp" + std::to_string(c.cp);
  name += "_h" + std::to_string(c.heads);
  name += "_kv" + std::to_string(c.kv_heads);
  name += "_d" + std::to_string(c.head_dim);
  if (c.q_row_stride != 0) name += "_qstride" + std::to_string(c.q_row_stride);
  return name;
}

class FlashAttentionContextParallelTest : public testing::GpuTestWithParam<ContextParallelCase> {};

// Every chunk's O and LSE rows are the full call's rows: each call is within
// the forward tolerances of the exact result, so the two are within twice
// them of each other.
TEST_P(FlashAttentionContextParallelTest, ChunkForwardsAreTheFullRows) {
  const ContextParallelCase cp = GetParam();
  const FlashAttentionShape full = cp.full();
  const int c = cp.chunk();
  const StridedRows rows = query_rows(full);
  const std::size_t row_elems = static_cast<std::size_t>(full.heads) * full.head_dim;
  const Operands x = random_operands(full, rng());
  DeviceBuffer<Bf16> d_q(rows.widen(x.q)), d_k(x.k), d_v(x.v), d_out(q_elems(full));
  DeviceBuffer<float> d_lse(lse_elems(full));
  flash_attention_forward(d_out.get(), d_lse.get(), d_q.get(), d_k.get(), d_v.get(), full, nullptr);
  const auto full_out = to_double(d_out.download());
  const auto full_lse = to_double(d_lse.download());
  const double atol = 2 * out_atol(to_double(x.v));

  for (int chunk = 0; chunk < 2 * cp.cp; ++chunk) {
    const FlashAttentionShape s = cp.chunk_shape(chunk);
    ASSERT_EQ(flash_attention_unsupported_reason(s), "") << "chunk " << chunk;
    DeviceBuffer<Bf16> d_chunk_out(q_elems(s));
    DeviceBuffer<float> d_chunk_lse(lse_elems(s));
    flash_attention_forward(d_chunk_out.get(), d_chunk_lse.get(),
                            d_q.get() + static_cast<std::size_t>(chunk) * c * rows.stride,
                            d_k.get(), d_v.get(), s, nullptr);
    EXPECT_TRUE(all_close(to_double(d_chunk_out.download()),
                          slice(full_out, chunk * c * row_elems, c * row_elems), 2e-2, atol))
        << "out, chunk " << chunk;
    EXPECT_TRUE(all_close(to_double(d_chunk_lse.download()),
                          lse_rows(full_lse, full.heads, full.seq, chunk * c, c), 0.0,
                          2 * lse_atol(full)))
        << "lse, chunk " << chunk;
  }
}

// The chunks' dQ rows are the full call's, and their dK, dV (each over its
// kv_seq prefix) sum to the full call's. Every call gets the reference's O and
// LSE (as tests/kernels/flash_attention_test.cc's backward tests do); each
// result is within its reference bound of the exact gradient, so a sum of
// chunk results and the full result differ by at most the sum of the bounds.
TEST_P(FlashAttentionContextParallelTest, ChunkBackwardsSumToTheFullGradients) {
  const ContextParallelCase cp = GetParam();
  const FlashAttentionShape full = cp.full();
  const int c = cp.chunk();
  const StridedRows rows = query_rows(full);
  const std::size_t row_elems = static_cast<std::size_t>(full.heads) * full.head_dim;
  const std::size_t kv_row_elems = static_cast<std::size_t>(full.kv_heads) * full.head_dim;
  const Operands x = random_operands(full, rng());
  const FlashAttentionShape contiguous = testing::contiguous(full);
  const auto qd = to_double(x.q), kd = to_double(x.k), vd = to_double(x.v);
  const auto doutd = to_double(x.dout);
  const AttentionReference fwd = reference_forward(qd, kd, vd, contiguous);
  const std::vector<Bf16> out = to_bf16(fwd.out);
  const std::vector<float> lse(fwd.lse.begin(), fwd.lse.end());
  const auto outd = to_double(out), lsed = to_double(lse);
  DeviceBuffer<Bf16> d_q(rows.widen(x.q)), d_k(x.k), d_v(x.v), d_dout(x.dout), d_out(out);
  DeviceBuffer<float> d_lse(lse);
  const std::vector<Bf16> fill_dq = rows.widen(std::vector<Bf16>(q_elems(full), kFill));

  // The full call.
  DeviceBuffer<Bf16> d_dq(fill_dq), d_dk(kv_elems(full)), d_dv(kv_elems(full));
  {
    const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(full);
    DeviceBuffer<char> d_ws(ws_bytes);
    flash_attention_backward(d_dq.get(), d_dk.get(), d_dv.get(), d_dout.get(), d_q.get(),
                             d_k.get(), d_v.get(), d_out.get(), d_lse.get(), full, d_ws.get(),
                             ws_bytes, nullptr);
  }
  const auto full_dq = to_double(rows.narrow(d_dq.download()));
  const auto full_dk = to_double(d_dk.download()), full_dv = to_double(d_dv.download());
  const AttentionGradients g = reference_backward(
      qd, kd, vd, outd, lsed, doutd, contiguous, flash_attention_backward_expands_kv_heads(full));
  std::vector<double> dq_bound(full_dq.size(), 0.0), dk_bound(full_dk.size(), 0.0),
      dv_bound(full_dv.size(), 0.0);
  add_bound(dq_bound, 0, g.dq_atol, g.dq);
  add_bound(dk_bound, 0, g.dk_atol, g.dk);
  add_bound(dv_bound, 0, g.dv_atol, g.dv);

  // The chunk calls: dQ into one buffer of the full rows, dK and dV summed here.
  DeviceBuffer<Bf16> d_chunk_dq(fill_dq);
  std::vector<double> dk_sum(full_dk.size(), 0.0), dv_sum(full_dv.size(), 0.0);
  for (int chunk = 0; chunk < 2 * cp.cp; ++chunk) {
    const FlashAttentionShape s = cp.chunk_shape(chunk);
    ASSERT_EQ(flash_attention_unsupported_reason(s), "") << "chunk " << chunk;
    const std::size_t first_row = static_cast<std::size_t>(chunk) * c;
    DeviceBuffer<float> d_chunk_lse(lse_rows(lse, full.heads, full.seq, chunk * c, c));
    DeviceBuffer<Bf16> d_chunk_dk(kv_elems(s)), d_chunk_dv(kv_elems(s));
    const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(s);
    DeviceBuffer<char> d_ws(ws_bytes);
    flash_attention_backward(d_chunk_dq.get() + first_row * rows.stride, d_chunk_dk.get(),
                             d_chunk_dv.get(), d_dout.get() + first_row * row_elems,
                             d_q.get() + first_row * rows.stride, d_k.get(), d_v.get(),
                             d_out.get() + first_row * row_elems, d_chunk_lse.get(), s,
                             d_ws.get(), ws_bytes, nullptr);
    const auto dk_part = to_double(d_chunk_dk.download()), dv_part = to_double(d_chunk_dv.download());
    for (std::size_t i = 0; i < dk_part.size(); ++i) {
      dk_sum[i] += dk_part[i];
      dv_sum[i] += dv_part[i];
    }
    const FlashAttentionShape chunk_contiguous = testing::contiguous(s);
    const std::size_t q_first = first_row * row_elems, q_count = q_elems(s);
    const AttentionGradients gc = reference_backward(
        slice(qd, q_first, q_count), slice(kd, 0, kv_elems(s)), slice(vd, 0, kv_elems(s)),
        slice(outd, q_first, q_count), lse_rows(lsed, full.heads, full.seq, chunk * c, c),
        slice(doutd, q_first, q_count), chunk_contiguous,
        flash_attention_backward_expands_kv_heads(s));
    add_bound(dq_bound, q_first, gc.dq_atol, gc.dq);
    add_bound(dk_bound, 0, gc.dk_atol, gc.dk);
    add_bound(dv_bound, 0, gc.dv_atol, gc.dv);
    ASSERT_EQ(kv_elems(s), static_cast<std::size_t>(chunk + 1) * c * kv_row_elems);
  }
  const std::vector<Bf16> chunk_dq = d_chunk_dq.download();
  EXPECT_TRUE(all_close(to_double(rows.narrow(chunk_dq)), full_dq, 0.0, dq_bound)) << "dq";
  EXPECT_TRUE(all_close(dk_sum, full_dk, 0.0, dk_bound)) << "dk";
  EXPECT_TRUE(all_close(dv_sum, full_dv, 0.0, dv_bound)) << "dv";
  EXPECT_EQ(rows.changed_padding(chunk_dq), 0u);
}

// {tokens, cp, heads, kv_heads, head_dim, q_row_stride}. Chunks of 128 at
// head_dim 128 run the Hopper kernels on an H100 (offsets whole 128-key
// blocks); chunks of 64 alternate between the Hopper and the generic forward
// (odd offsets of 64) and give the Hopper backward (either head_dim) offsets of
// half a key block; chunks of 96 are no whole number of blocks. On devices
// other than compute capability 9.0, GQA at head_dim 64 with so few blocks runs
// the generic backward with K and V expanded to every query head.
INSTANTIATE_TEST_SUITE_P(Cases, FlashAttentionContextParallelTest,
                         ::testing::Values(ContextParallelCase{512, 2, 4, 1, 128, 768},
                                           ContextParallelCase{256, 2, 2, 2, 128, 0},
                                           ContextParallelCase{512, 4, 4, 4, 64, 0},
                                           ContextParallelCase{384, 2, 4, 2, 64, 512}),
                         case_name);

// The argument checks run before any CUDA call, so these need no GPU.
TEST(FlashAttentionKvSeqArguments, KvSeqIsCheckedAgainstSeqAndTheGrid) {
  EXPECT_EQ(flash_attention_unsupported_reason({2, 100, 300, 4, 1, 64}), "");
  EXPECT_EQ(flash_attention_unsupported_reason({2, 100, 100, 4, 1, 64}), "");
  EXPECT_EQ(flash_attention_unsupported_reason({2, 100, 99, 4, 1, 64}),
            "kv_seq (99) must be 0 (= seq) or at least seq (100)");
  EXPECT_EQ(flash_attention_unsupported_reason({2, 100, -1, 4, 1, 64}),
            "kv_seq (-1) must be 0 (= seq) or at least seq (100)");
  // The backward's grid z holds kv_seq / 128 key blocks, at most 65535.
  EXPECT_EQ(flash_attention_unsupported_reason({1, 64, 8388480, 4, 4, 64}), "");
  EXPECT_EQ(flash_attention_unsupported_reason({1, 64, 8388481, 4, 4, 64}),
            "kv_seq (8388481) must be at most 8388480");
}

TEST(FlashAttentionKvSeqArguments, WorkspaceCoversKvSeq) {
  // Queries only: the Hopper kernel's dQ, delta and LSE over 2 * 4 * 128 rows,
  // 4 * 1024 * (64 + 2) bytes (above the generic kernel's 266240, (2, 128, 4,
  // 64) fp32 dQ plus (2, 4, 128) fp32 delta).
  EXPECT_EQ(flash_attention_backward_workspace_bytes({2, 128, 512, 4, 4, 64}), 270336u);
  // GQA adds K, V, dK and dV expanded to the 4 query heads over kv_seq:
  // (2, 512, 4, 64) bf16 each.
  EXPECT_EQ(flash_attention_backward_workspace_bytes({2, 128, 512, 4, 1, 64}),
            266240u + 4 * 262144 * 2);
  EXPECT_EQ(flash_attention_backward_workspace_bytes({2, 128, 64, 4, 1, 64}), 0u);
}

}  // namespace
}  // namespace sextant::kernels
