// Causal flash attention forward and backward against a double-precision CPU
// reference on N(0, 1) bf16 inputs (scores q.k/sqrt(d) then have standard
// deviation 1).
//
// Forward tolerances:
// - O: rtol 1e-2 and atol 2^-8 * max|V|. The kernel rounds the probabilities
//   P to bf16 before the tensor-core product P V (relative error <= 2^-9 per
//   element), so the numerator sum_j p_j v_j is off by at most
//   2^-9 * sum_j p_j |v_j| <= 2^-9 * l * max|V|, i.e. O by 2^-9 * max|V|; the
//   atol doubles that for the fp32 sums. The final bf16 rounding of O is
//   relative (2^-9), inside the rtol.
// - LSE: atol max(1e-4, seq * 2^-24). Everything is fp32 there: scores
//   summed in fp32 over head_dim bf16 products, the running sum over <= seq
//   terms (relative <= seq * 2^-24 in the worst case: 6e-5 at seq 1000, 2.4e-4
//   at 4096), which the logarithm turns into an absolute error of the same size.
//
// Backward tolerances: the test feeds the kernel the reference's O (rounded
// to bf16) and LSE (rounded to fp32), and the reference uses that same bf16 O
// for delta_i = dO_i . O_i, so the backward is checked on its own. The kernel
// rounds P and dS = P (dP - delta) to bf16 before the tensor-core products
// (relative error <= 2^-9 each); everything else is fp32. dS also carries the
// fp32 error of dP_ij - delta_i, two d-term dot products that may cancel
// exactly (query 0 attends only key 0, where dP = delta and dS = 0): at most
// d * 2^-24 * (sum_c |dO_ic V_jc| + sum_c |dO_ic O_ic|) times P_ij. So
//   e_ij = 2^-9 |dS_ij| + P_ij d 2^-24 (sum_c |dO_ic V_jc| + |dO_ic O_ic|)
//   dV_jc: 2^-9 sum_i P_ij |dO_ic|
//   dK_jc: scale sum_i e_ij |Q_ic|,   dQ_ic: scale sum_j e_ij |K_jc|
// The atol is twice that bound (the other fp32 sums) plus 1e-6; rtol 1e-2
// covers the final bf16 rounding (2^-9 relative).
//
// The fused tests lay Q, K and V out as the engine's QKV GEMM writes them,
// column slices of one (tokens, (heads + 2 kv_heads) head_dim [+ padding])
// buffer, and the gradients as slices of one such buffer; the same references
// and bounds apply, and the padding columns must come back untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/flash_attention.h"
#include "tests/kernels/flash_attention_reference.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::AttentionGradients;
using testing::AttentionReference;
using testing::lse_atol;
using testing::reference_backward;
using testing::reference_forward;
using testing::to_bf16;
using testing::DeviceBuffer;
using testing::to_double;

/// Q, K, V (or dQ, dK, dV) as column slices of one (tokens, stride) buffer: q
/// in columns [0, h d), k in [h d, (h + hkv) d), v in [(h + hkv) d, (h + 2 hkv) d);
/// the columns after that are padding.
struct FusedColumns {
  std::size_t tokens = 0;
  int stride = 0;
  int q_width = 0, kv_width = 0;  // h d, hkv d
  std::size_t k_column() const { return static_cast<std::size_t>(q_width); }
  std::size_t v_column() const { return static_cast<std::size_t>(q_width) + kv_width; }
  std::size_t elems() const { return tokens * stride; }
};

FusedColumns fused_columns(const FlashAttentionShape& s) {
  FusedColumns f;
  f.tokens = static_cast<std::size_t>(s.batch) * s.seq;
  f.stride = s.q_row_stride;
  f.q_width = s.heads * s.head_dim;
  f.kv_width = s.kv_heads * s.head_dim;
  return f;
}

/// Copies the (tokens, width) row-major `part` into columns [column, column + width) of `fused`.
void place_columns(std::vector<Bf16>& fused, const FusedColumns& f, std::size_t column,
                   const std::vector<Bf16>& part, int width) {
  for (std::size_t t = 0; t < f.tokens; ++t)
    std::copy_n(part.begin() + t * width, width, fused.begin() + t * f.stride + column);
}

/// The (tokens, width) slice of `fused` at `column`, row-major.
std::vector<Bf16> take_columns(const std::vector<Bf16>& fused, const FusedColumns& f,
                               std::size_t column, int width) {
  std::vector<Bf16> part(f.tokens * width);
  for (std::size_t t = 0; t < f.tokens; ++t)
    std::copy_n(fused.begin() + t * f.stride + column, width, part.begin() + t * width);
  return part;
}

/// How many padding columns (past q, k and v) of `fused` differ from `fill`.
std::size_t changed_padding(const std::vector<Bf16>& fused, const FusedColumns& f, Bf16 fill) {
  std::size_t changed = 0;
  for (std::size_t t = 0; t < f.tokens; ++t)
    for (std::size_t c = f.v_column() + f.kv_width; c < static_cast<std::size_t>(f.stride); ++c)
      changed += fused[t * f.stride + c].bits != fill.bits;
  return changed;
}

/// Runs the forward on fresh N(0, 1) contiguous inputs of shape `s` and checks
/// O and LSE against the double reference with the header's tolerances.
void expect_forward_matches_reference(const FlashAttentionShape& s, std::mt19937_64& rng) {
  const std::size_t q_elems = static_cast<std::size_t>(s.batch) * s.seq * s.heads * s.head_dim;
  const std::size_t kv_elems = static_cast<std::size_t>(s.batch) * s.seq * s.kv_heads * s.head_dim;
  const std::size_t lse_elems = static_cast<std::size_t>(s.batch) * s.heads * s.seq;
  const auto q = testing::random_bf16(rng, q_elems, 0.0, 1.0);
  const auto k = testing::random_bf16(rng, kv_elems, 0.0, 1.0);
  const auto v = testing::random_bf16(rng, kv_elems, 0.0, 1.0);
  DeviceBuffer<Bf16> d_q(q), d_k(k), d_v(v), d_out(q_elems);
  DeviceBuffer<float> d_lse(lse_elems);

  flash_attention_forward(d_out.get(), d_lse.get(), d_q.get(), d_k.get(), d_v.get(), s, nullptr);

  const auto vd = to_double(v);
  const AttentionReference ref = reference_forward(to_double(q), to_double(k), vd, s);
  double max_abs_v = 0;
  for (double x : vd) max_abs_v = std::max(max_abs_v, std::abs(x));
  EXPECT_TRUE(all_close(to_double(d_out.download()), ref.out, 1e-2, std::ldexp(max_abs_v, -8)))
      << "out";
  EXPECT_TRUE(all_close(to_double(d_lse.download()), ref.lse, 0.0, lse_atol(s))) << "lse";
}

class FlashAttentionTest : public testing::GpuTestWithParam<FlashAttentionShape> {};

TEST_P(FlashAttentionTest, ForwardMatchesReference) {
  expect_forward_matches_reference(GetParam(), rng());
}

TEST_P(FlashAttentionTest, BackwardMatchesReference) {
  const FlashAttentionShape s = GetParam();
  const std::size_t q_elems = static_cast<std::size_t>(s.batch) * s.seq * s.heads * s.head_dim;
  const std::size_t kv_elems = static_cast<std::size_t>(s.batch) * s.seq * s.kv_heads * s.head_dim;
  const auto q = testing::random_bf16(rng(), q_elems, 0.0, 1.0);
  const auto k = testing::random_bf16(rng(), kv_elems, 0.0, 1.0);
  const auto v = testing::random_bf16(rng(), kv_elems, 0.0, 1.0);
  const auto dout = testing::random_bf16(rng(), q_elems, 0.0, 1.0);
  const auto qd = to_double(q), kd = to_double(k), vd = to_double(v);
  const AttentionReference fwd = reference_forward(qd, kd, vd, s);
  const std::vector<Bf16> out = to_bf16(fwd.out);
  std::vector<float> lse(fwd.lse.begin(), fwd.lse.end());
  DeviceBuffer<Bf16> d_q(q), d_k(k), d_v(v), d_dout(dout), d_out(out);
  DeviceBuffer<Bf16> d_dq(q_elems), d_dk(kv_elems), d_dv(kv_elems);
  DeviceBuffer<float> d_lse(lse);
  const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(s);
  DeviceBuffer<char> d_ws(ws_bytes);

  flash_attention_backward(d_dq.get(), d_dk.get(), d_dv.get(), d_dout.get(), d_q.get(), d_k.get(),
                           d_v.get(), d_out.get(), d_lse.get(), s, d_ws.get(), ws_bytes, nullptr);

  const AttentionGradients g = reference_backward(qd, kd, vd, to_double(out), to_double(lse),
                                         to_double(dout), s, flash_attention_backward_expands_kv_heads(s));
  EXPECT_TRUE(all_close(to_double(d_dv.download()), g.dv, 1e-2, g.dv_atol)) << "dv";
  EXPECT_TRUE(all_close(to_double(d_dk.download()), g.dk, 1e-2, g.dk_atol)) << "dk";
  EXPECT_TRUE(all_close(to_double(d_dq.download()), g.dq, 1e-2, g.dq_atol)) << "dq";
}

// Sequences 128 and 256 fill the blocks (64 queries, 64 or 128 keys); 1000 and
// 65 end in a partial block; 1 is a single padded block. kv_heads 1 and 2 are
// GQA, 4 is MHA. 2050 is past 2048, where the Hopper backward launches its
// blocks in the other order (key blocks outermost), and ends in a partial block.
// On a device other than compute capability 9.0, GQA at head_dim 64 with fewer
// (kv head, sequence, key block) blocks than the GPU has SMs runs with K and V
// expanded to every query head; 66 sequences of 128 at 2 kv heads make 132
// blocks, an H100's or H200's SM count, and keep the kernel's own walk over
// each group's query heads. (On an H100 or H200 every shape here runs the
// Hopper backward, head_dim 64 included.)
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionTest,
                         ::testing::Values(FlashAttentionShape{2, 128, 0, 4, 4, 64},
                                           FlashAttentionShape{2, 128, 0, 4, 1, 128},
                                           FlashAttentionShape{1, 256, 0, 4, 4, 128},
                                           FlashAttentionShape{1, 256, 0, 4, 1, 64},
                                           FlashAttentionShape{1, 1000, 0, 4, 1, 128},
                                           FlashAttentionShape{2, 1000, 0, 4, 4, 64},
                                           FlashAttentionShape{3, 65, 0, 4, 2, 128},
                                           FlashAttentionShape{1, 1, 0, 4, 2, 64},
                                           FlashAttentionShape{1, 2050, 0, 2, 1, 128},
                                           FlashAttentionShape{66, 128, 0, 4, 2, 64}),
                         testing::flash_attention_shape_name);

// Forward only (the backward's reference would take minutes): a long sequence,
// and grids of more (query block, batch, head) tiles than an H100 has SMs
// (132), so the Hopper kernel's persistent blocks take several tiles each and
// its K/V pipeline runs across tile boundaries. 8 * 8 * ceil(520 / 128) = 320
// tiles, the last query block of each sequence partial (520 = 4 * 128 + 8).
class FlashAttentionForwardTest : public testing::GpuTestWithParam<FlashAttentionShape> {};

TEST_P(FlashAttentionForwardTest, MatchesReference) {
  expect_forward_matches_reference(GetParam(), rng());
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionForwardTest,
                         ::testing::Values(FlashAttentionShape{1, 4096, 0, 2, 1, 128},
                                           FlashAttentionShape{2, 2048, 0, 2, 2, 64},
                                           FlashAttentionShape{8, 520, 0, 8, 2, 128},
                                           FlashAttentionShape{8, 520, 0, 8, 8, 64}),
                         testing::flash_attention_shape_name);

// q_row_stride == kv_row_stride: one fused (tokens, stride) buffer for Q, K, V.
class FlashAttentionFusedTest : public testing::GpuTestWithParam<FlashAttentionShape> {};

TEST_P(FlashAttentionFusedTest, ForwardMatchesReference) {
  const FlashAttentionShape s = GetParam();
  ASSERT_EQ(s.q_row_stride, s.kv_row_stride);
  ASSERT_EQ(flash_attention_unsupported_reason(s), "");
  const FusedColumns f = fused_columns(s);
  const Bf16 fill = from_float(1e4f);  // padding: would dominate any score it leaked into
  const auto q = testing::random_bf16(rng(), f.tokens * f.q_width, 0.0, 1.0);
  const auto k = testing::random_bf16(rng(), f.tokens * f.kv_width, 0.0, 1.0);
  const auto v = testing::random_bf16(rng(), f.tokens * f.kv_width, 0.0, 1.0);
  std::vector<Bf16> qkv(f.elems(), fill);
  place_columns(qkv, f, 0, q, f.q_width);
  place_columns(qkv, f, f.k_column(), k, f.kv_width);
  place_columns(qkv, f, f.v_column(), v, f.kv_width);
  DeviceBuffer<Bf16> d_qkv(qkv), d_out(f.tokens * f.q_width);
  DeviceBuffer<float> d_lse(static_cast<std::size_t>(s.batch) * s.heads * s.seq);

  flash_attention_forward(d_out.get(), d_lse.get(), d_qkv.get(), d_qkv.get() + f.k_column(),
                          d_qkv.get() + f.v_column(), s, nullptr);

  FlashAttentionShape contiguous = s;
  contiguous.q_row_stride = contiguous.kv_row_stride = 0;
  const auto vd = to_double(v);
  const AttentionReference ref = reference_forward(to_double(q), to_double(k), vd, contiguous);
  double max_abs_v = 0;
  for (double x : vd) max_abs_v = std::max(max_abs_v, std::abs(x));
  EXPECT_TRUE(all_close(to_double(d_out.download()), ref.out, 1e-2, std::ldexp(max_abs_v, -8)))
      << "out";
  EXPECT_TRUE(all_close(to_double(d_lse.download()), ref.lse, 0.0, lse_atol(s))) << "lse";
}

TEST_P(FlashAttentionFusedTest, BackwardMatchesReference) {
  const FlashAttentionShape s = GetParam();
  ASSERT_EQ(s.q_row_stride, s.kv_row_stride);
  ASSERT_EQ(flash_attention_unsupported_reason(s), "");
  const FusedColumns f = fused_columns(s);
  const Bf16 fill = from_float(1e4f);
  const auto q = testing::random_bf16(rng(), f.tokens * f.q_width, 0.0, 1.0);
  const auto k = testing::random_bf16(rng(), f.tokens * f.kv_width, 0.0, 1.0);
  const auto v = testing::random_bf16(rng(), f.tokens * f.kv_width, 0.0, 1.0);
  const auto dout = testing::random_bf16(rng(), f.tokens * f.q_width, 0.0, 1.0);
  FlashAttentionShape contiguous = s;
  contiguous.q_row_stride = contiguous.kv_row_stride = 0;
  const auto qd = to_double(q), kd = to_double(k), vd = to_double(v);
  const AttentionReference fwd = reference_forward(qd, kd, vd, contiguous);
  const std::vector<Bf16> out = to_bf16(fwd.out);
  std::vector<float> lse(fwd.lse.begin(), fwd.lse.end());
  std::vector<Bf16> qkv(f.elems(), fill);
  place_columns(qkv, f, 0, q, f.q_width);
  place_columns(qkv, f, f.k_column(), k, f.kv_width);
  place_columns(qkv, f, f.v_column(), v, f.kv_width);
  // The gradient buffer starts as all `fill`: the kernels must write every
  // dq, dk, dv column and leave the padding alone.
  DeviceBuffer<Bf16> d_qkv(qkv), d_dqkv(std::vector<Bf16>(f.elems(), fill));
  DeviceBuffer<Bf16> d_dout(dout), d_out(out);
  DeviceBuffer<float> d_lse(lse);
  const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(s);
  ASSERT_EQ(ws_bytes, flash_attention_backward_workspace_bytes(contiguous));
  DeviceBuffer<char> d_ws(ws_bytes);

  flash_attention_backward(d_dqkv.get(), d_dqkv.get() + f.k_column(), d_dqkv.get() + f.v_column(),
                           d_dout.get(), d_qkv.get(), d_qkv.get() + f.k_column(),
                           d_qkv.get() + f.v_column(), d_out.get(), d_lse.get(), s, d_ws.get(),
                           ws_bytes, nullptr);

  const AttentionGradients g = reference_backward(qd, kd, vd, to_double(out), to_double(lse), to_double(dout),
                                         contiguous, flash_attention_backward_expands_kv_heads(s));
  const std::vector<Bf16> dqkv = d_dqkv.download();
  EXPECT_TRUE(all_close(to_double(take_columns(dqkv, f, f.v_column(), f.kv_width)), g.dv, 1e-2,
                        g.dv_atol))
      << "dv";
  EXPECT_TRUE(all_close(to_double(take_columns(dqkv, f, f.k_column(), f.kv_width)), g.dk, 1e-2,
                        g.dk_atol))
      << "dk";
  EXPECT_TRUE(all_close(to_double(take_columns(dqkv, f, 0, f.q_width)), g.dq, 1e-2, g.dq_atol))
      << "dq";
  EXPECT_EQ(changed_padding(dqkv, f, fill), 0u);
}

// Strides: (4 + 2 * 4) * 64 = 768, the fused width exactly (MHA); (4 + 2 * 2)
// * 128 + 8 = 1032 and (4 + 2 * 1) * 64 + 8 = 392, with 8 padding columns (GQA).
// Sequences: 128 fills the blocks, 200 and 65 end in partial ones.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionFusedTest,
                         ::testing::Values(FlashAttentionShape{2, 128, 0, 4, 4, 64, 768, 768},
                                           FlashAttentionShape{1, 200, 0, 4, 2, 128, 1032, 1032},
                                           FlashAttentionShape{2, 65, 0, 4, 1, 64, 392, 392}),
                         testing::flash_attention_shape_name);

// The argument checks run before any CUDA call, so these need no GPU.
TEST(FlashAttentionArguments, UnsupportedShapeNamesEveryProblem) {
  EXPECT_EQ(flash_attention_unsupported_reason({2, 128, 0, 4, 4, 64}), "");
  EXPECT_EQ(flash_attention_unsupported_reason({0, 128, 0, 6, 4, 96}),
            "head_dim (96) must be 64 or 128; batch (0) must be in [1, 65535]; kv_heads (4) must "
            "divide heads (6)");
  EXPECT_EQ(flash_attention_unsupported_reason({1, 0, 0, 4, 0, 128}),
            "seq (0) must be positive; kv_heads (0) must be positive");
  // The grid's z dimension holds seq / 64 blocks, at most 65535.
  EXPECT_EQ(flash_attention_unsupported_reason({1, 4194241, 0, 4, 4, 64}),
            "seq (4194241) must be at most 4194240");
}

TEST(FlashAttentionArguments, UnsupportedStridesNameTheWidth) {
  // A fused QKV buffer of 4 + 2 * 2 heads of 64: stride 512.
  EXPECT_EQ(flash_attention_unsupported_reason({2, 128, 0, 4, 2, 64, 512, 512}), "");
  EXPECT_EQ(flash_attention_unsupported_reason({2, 128, 0, 4, 2, 64, 0, 136}), "");
  EXPECT_EQ(flash_attention_unsupported_reason({2, 128, 0, 4, 2, 64, 260, 120}),
            "q_row_stride (260) must be 0 or a multiple of 8 no less than heads * head_dim "
            "(256); kv_row_stride (120) must be 0 or a multiple of 8 no less than kv_heads * "
            "head_dim (128)");
  EXPECT_EQ(flash_attention_unsupported_reason({2, 128, 0, 4, 2, 64, -256, 0}),
            "q_row_stride (-256) must be 0 or a multiple of 8 no less than heads * head_dim (256)");
}

TEST(FlashAttentionArguments, BackwardChecksWorkspace) {
  // The generic kernel's (2, 128, 4, 64) fp32 dQ plus (2, 4, 128) fp32 delta,
  // 4 * (65536 + 1024) = 266240 bytes, is below the Hopper kernel's: dQ, delta
  // and LSE over 2 * 4 rows of 128 queries (one 128-query block at head_dim
  // 64), 4 * 1024 * (64 + 2) bytes.
  EXPECT_EQ(flash_attention_backward_workspace_bytes({2, 128, 0, 4, 4, 64}), 270336u);
  // GQA adds K, V, dK and dV expanded to the 4 query heads, (2, 128, 4, 64) bf16
  // each, after the first part rounded up to 256 bytes (266240 already is).
  EXPECT_EQ(flash_attention_backward_workspace_bytes({2, 128, 0, 4, 1, 64}), 266240u + 4 * 65536 * 2);
  alignas(16) Bf16 buffer[8];
  float lse[1];
  try {
    flash_attention_backward(buffer, buffer, buffer, buffer, buffer, buffer, buffer, buffer, lse,
                             {2, 128, 0, 4, 1, 64}, buffer, 16, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "flash_attention_backward: workspace (16 bytes) is smaller than the 790528 bytes "
                 "flash_attention_backward_workspace_bytes asks for");
  }
}

TEST(FlashAttentionArguments, LauncherThrowsBeforeLaunching) {
  alignas(16) Bf16 buffer[8];
  float lse[1];
  try {
    flash_attention_forward(buffer, lse, buffer, buffer, buffer, {1, 1, 0, 3, 2, 64}, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "flash_attention_forward: kv_heads (2) must divide heads (3)");
  }
  try {
    flash_attention_forward(buffer + 1, lse, buffer, buffer, buffer, {1, 1, 0, 2, 2, 64}, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "flash_attention_forward: out, q, k and v must be 16-byte aligned (16-byte row "
                 "loads)");
  }
}

// Backward at head_dim 128 over more key blocks than the short shapes: 520 =
// 4 * 128 + 8 keys (five 128-key blocks, the last partial; 9 query blocks of
// 64, the last partial) and GQA groups of 4 query heads, so each of the Hopper
// kernel's blocks walks 4 heads and its (Q, dO) slots wrap many times; and an
// MHA shape that fills its blocks exactly (2 * 4 * 512 keys in 32 blocks).
INSTANTIATE_TEST_SUITE_P(LongShapes, FlashAttentionTest,
                         ::testing::Values(FlashAttentionShape{2, 520, 0, 8, 2, 128},
                                           FlashAttentionShape{2, 512, 0, 4, 4, 128}),
                         testing::flash_attention_shape_name);

// The Hopper backward at head_dim 64 (128 queries a step, 128 keys a block,
// kernels/flash_attention_backward_sm90_tiles.cuh) on an H100 or H200: 2304 =
// 18 whole query blocks and 2200 = 17 * 128 + 24 (a partial last block) are
// past 2048, where the key blocks launch outermost (the shapes above take the
// other order); GQA groups of 4 (8 heads over 2) and 8 (16 over 2), so each
// block walks 4 or 8 heads and its two (Q, dO) slots wrap many times, at 520 =
// 4 * 128 + 8 and 384 = 3 * 128 queries; one query row of 8 heads over 2.
INSTANTIATE_TEST_SUITE_P(HopperHeadDim64, FlashAttentionTest,
                         ::testing::Values(FlashAttentionShape{1, 2304, 0, 2, 1, 64},
                                           FlashAttentionShape{1, 2200, 0, 2, 2, 64},
                                           FlashAttentionShape{2, 520, 0, 8, 2, 64},
                                           FlashAttentionShape{1, 384, 0, 16, 2, 64},
                                           FlashAttentionShape{2, 1, 0, 8, 2, 64}),
                         testing::flash_attention_shape_name);

}  // namespace
}  // namespace sextant::kernels
