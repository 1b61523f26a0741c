// rope_forward and rope_backward against a double-precision CPU reference of
// the rotate-half RoPE (Su et al. 2021, eq. 34), on the fused QKV buffer.
//
// Tolerance: rtol 1e-2 (one bf16 rounding of each output is <= 2^-9 relative)
// plus, per element, atol = r * (3 t 2^-23 + 2^-20), where t is the position
// and r = |(x[i], x[i + d/2])| the length of the pair rotated. The kernel's
// fp32 angle t * 2^(i * step) is off by at most 2.5 t 2^-23 rad (the exponent
// i * step carries two roundings, 2^-23 relative, which exp2f turns into
// ln2 |e| 2^-23 of the inverse frequency 2^e; exp2f adds 2 ulp and the product
// t * inv_freq half an ulp; 2^e (ln2 |e| + 2.5) <= 2.5 for e <= 0), and an
// angle error moves the output by at most r times it; sincosf's 2 ulp and the
// fp32 products add a few 2^-24 r. At t = 4095 that is 1.5e-3 r.
// Under context parallelism (chunked positions, kernels/sequence_positions.h)
// t is the token's position in the whole sequence, which the reference takes
// independently of the kernel: chunk j's token u is at chunk_start[j] + u.
// Value heads and padding columns must come back bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int batch, seq, heads, kv_heads, head_dim;
  int padding = 0;  // extra columns at the end of each row, beyond the V heads
  float theta = 10000.0f;
  // Context parallelism: two chunks of seq / 2 tokens starting at these
  // positions of the whole sequence (-1: positions 0..seq-1).
  int chunk_start0 = -1, chunk_start1 = -1;
};

RopeShape shape_of(const Case& c) {
  RopeShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.row_stride = (c.heads + 2 * c.kv_heads) * c.head_dim + c.padding;
  s.theta = c.theta;
  if (c.chunk_start0 >= 0) s.positions = SequencePositions{c.seq / 2, {c.chunk_start0, c.chunk_start1}};
  return s;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  // append() rather than a chain of +, which trips GCC 12's -Wrestrict false positive.
  std::string name;
  name.append("b").append(std::to_string(c.batch)).append("_s").append(std::to_string(c.seq));
  name.append("_h").append(std::to_string(c.heads));
  name.append("_kv").append(std::to_string(c.kv_heads));
  name.append("_d").append(std::to_string(c.head_dim));
  name.append("_pad").append(std::to_string(c.padding));
  name.append("_theta").append(std::to_string(static_cast<long>(c.theta)));
  if (c.chunk_start0 >= 0)
    name.append("_chunks").append(std::to_string(c.chunk_start0)).append("_").append(std::to_string(c.chunk_start1));
  return name;
}

std::size_t elements(const RopeShape& s) {
  return static_cast<std::size_t>(s.batch) * s.seq * s.row_stride;
}

// The reference rotation of a whole fused buffer by sign * angle, in double,
// and the tolerance of each element (see the top of the file; 0 outside Q and K,
// which are compared bit for bit instead).
struct Reference {
  std::vector<double> want;
  std::vector<double> atol;
};

Reference rotate(const std::vector<double>& x, const RopeShape& s, double sign) {
  Reference r{x, std::vector<double>(x.size(), 0.0)};
  const int d = s.head_dim, half = d / 2;
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(s.batch) * s.seq; ++row) {
    // The position in the whole sequence, from the chunks' starts.
    const int local = static_cast<int>(row % s.seq);
    const int c = s.positions.chunk_tokens;
    const int t = c == 0 ? local : local < c ? s.positions.chunk_start[0] + local
                                             : s.positions.chunk_start[1] + local - c;
    for (int head = 0; head < s.heads + s.kv_heads; ++head) {
      const std::size_t base = static_cast<std::size_t>(row) * s.row_stride +
                               static_cast<std::size_t>(head) * d;
      for (int i = 0; i < half; ++i) {
        const double angle = sign * t * std::pow(static_cast<double>(s.theta), -2.0 * i / d);
        const double x1 = x[base + i], x2 = x[base + i + half];
        r.want[base + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
        r.want[base + i + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
        const double bound = std::hypot(x1, x2) * (3.0 * t * 0x1p-23 + 0x1p-20);
        r.atol[base + i] = r.atol[base + i + half] = bound;
      }
    }
  }
  return r;
}

// Elements outside the query and key heads that differ from `before` in any bit.
::testing::AssertionResult untouched_outside_qk(const std::vector<Bf16>& after,
                                                const std::vector<Bf16>& before,
                                                const RopeShape& s) {
  const std::size_t rotated_columns =
      static_cast<std::size_t>(s.heads + s.kv_heads) * s.head_dim;
  std::size_t changed = 0, first = 0;
  for (std::size_t e = 0; e < before.size(); ++e) {
    if (e % s.row_stride < rotated_columns) continue;
    if (after[e].bits != before[e].bits && changed++ == 0) first = e;
  }
  if (changed == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << changed << " value-head or padding elements changed; first at row "
         << first / s.row_stride << ", column " << first % s.row_stride;
}

class RopeTest : public testing::GpuTestWithParam<Case> {};

TEST_P(RopeTest, ForwardMatchesReference) {
  const RopeShape s = shape_of(GetParam());
  const auto before = testing::random_bf16(rng(), elements(s), 0.0, 1.0);
  DeviceBuffer<Bf16> qkv(before);

  rope_forward(qkv.get(), s, nullptr);

  const auto after = qkv.download();
  const Reference ref = rotate(to_double(before), s, 1.0);
  EXPECT_TRUE(all_close(to_double(after), ref.want, 1e-2, ref.atol));
  EXPECT_TRUE(untouched_outside_qk(after, before, s));
}

TEST_P(RopeTest, BackwardRotatesGradientsByMinusTheAngle) {
  const RopeShape s = shape_of(GetParam());
  const auto before = testing::random_bf16(rng(), elements(s), 0.0, 1.0);
  DeviceBuffer<Bf16> dqkv(before);

  rope_backward(dqkv.get(), s, nullptr);

  const auto after = dqkv.download();
  const Reference ref = rotate(to_double(before), s, -1.0);
  EXPECT_TRUE(all_close(to_double(after), ref.want, 1e-2, ref.atol));
  EXPECT_TRUE(untouched_outside_qk(after, before, s));
}

// Backward after forward is the identity up to two bf16 roundings: the
// forward's rounding, |error| <= 2^-9 |y| per component, rotated back, is at
// most 2^-9 sqrt(2) r in each component; the backward's own rounding adds
// 2^-9 |x| <= 2^-9 r. The angles cancel exactly (the backward negates the sine
// of the very same fp32 angle), so atol = 2^-7 r > (sqrt(2) + 1) 2^-9 r.
TEST_P(RopeTest, BackwardUndoesForward) {
  const RopeShape s = shape_of(GetParam());
  const auto before = testing::random_bf16(rng(), elements(s), 0.0, 1.0);
  DeviceBuffer<Bf16> qkv(before);

  rope_forward(qkv.get(), s, nullptr);
  rope_backward(qkv.get(), s, nullptr);

  const auto after = qkv.download();
  const std::vector<double> x = to_double(before);
  std::vector<double> atol(x.size(), 0.0);
  const int half = s.head_dim / 2;
  for (std::size_t e = 0; e < x.size(); ++e) {
    const std::size_t column = e % s.row_stride;
    if (column >= static_cast<std::size_t>(s.heads + s.kv_heads) * s.head_dim) continue;
    const std::size_t i = column % s.head_dim;
    const std::size_t partner = i < static_cast<std::size_t>(half) ? e + half : e - half;
    atol[e] = 0x1p-7 * std::hypot(x[e], x[partner]);
  }
  EXPECT_TRUE(all_close(to_double(after), x, 0.0, atol));
  EXPECT_TRUE(untouched_outside_qk(after, before, s));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeTest,
    ::testing::Values(
        // MHA, the smallest 16-byte case (d/2 = 8 per half: one vector).
        Case{2, 5, 2, 2, 16},
        // MHA, d 64, two sequences: positions restart at 0 in the second.
        Case{2, 300, 4, 4, 64},
        // GQA 8:2, d 128, a 4096-token sequence (angles up to 4095 rad).
        Case{1, 4096, 8, 2, 128},
        // GQA 4:1, d 64, Llama 3's theta, 5 heads per row not a multiple of 4.
        Case{3, 257, 4, 1, 64, 0, 500000.0f},
        // GQA, d 128, 8 padding columns after the V heads, 2048-token sequences.
        Case{2, 2048, 6, 2, 128, 8},
        // d 256 (the largest accepted).
        Case{1, 64, 2, 1, 256},
        // d/2 = 36: not a multiple of 8, so 4-byte (bf16x2) accesses.
        Case{2, 33, 3, 1, 72},
        // d/2 = 5, odd: element-wise accesses; row (3 + 2) * 10 = 50 padded to 56.
        Case{1, 50, 3, 1, 10, 6},
        // Context parallelism, cp = 4 of a 2048-token sequence: rank 1 holds
        // chunks 1 and 6 of 256 tokens, at positions 256 and 1536; two sequences.
        Case{2, 512, 4, 2, 64, 0, 10000.0f, 256, 1536},
        // cp = 8 of 16384 tokens, rank 1: chunks 1 and 14 of 1024 at 1024 and
        // 14336 (angles up to 15359 rad), GQA, d 128, Llama 3's theta.
        Case{1, 2048, 8, 2, 128, 0, 500000.0f, 1024, 14336},
        // cp = 2 of 66 tokens, rank 0: chunks 0 and 3 of 33 (odd chunks), d/2 odd.
        Case{1, 66, 3, 1, 10, 6, 10000.0f, 0, 99}),
    case_name);

// Argument checks run on the host before any launch, so they need no GPU.
TEST(RopeArguments, UnsupportedShapeNamesEveryProblem) {
  RopeShape ok{2, 128, 32, 8, 128, 6144};
  EXPECT_EQ(rope_unsupported_reason(ok), "");
  ok.row_stride = 6152;  // padding is allowed
  EXPECT_EQ(rope_unsupported_reason(ok), "");

  EXPECT_EQ(rope_unsupported_reason(RopeShape{0, 0, 0, 0, 7, 12, 1.0f}),
            "batch (0) must be positive; seq (0) must be in [1, 16777216] (positions are exact "
            "in fp32 up to 2^24); heads (0) must be positive; kv_heads (0) must be positive; "
            "head_dim (7) must be even and in [2, 256]; row_stride (12) must be a positive "
            "multiple of 8 (16-byte aligned rows); theta (1) must be finite and above 1");
  EXPECT_EQ(rope_unsupported_reason(RopeShape{1, 16, 4, 2, 258, 2064}),
            "head_dim (258) must be even and in [2, 256]");
  // (32 + 2 * 8) * 128 = 6144 columns needed.
  EXPECT_EQ(rope_unsupported_reason(RopeShape{1, 16, 32, 8, 128, 4096}),
            "row_stride (4096) must be at least (heads + 2 * kv_heads) * head_dim = "
            "(32 + 2 * 8) * 128 = 6144");
  EXPECT_EQ(rope_unsupported_reason(RopeShape{1, 16777217, 1, 1, 64, 192, NAN}),
            "seq (16777217) must be in [1, 16777216] (positions are exact in fp32 up to 2^24); "
            "theta (nan) must be finite and above 1");
}

TEST(RopeArguments, ChunkedPositionsAreChecked) {
  RopeShape s{1, 128, 4, 2, 64, 512};
  s.positions = SequencePositions{64, {64, 192}};  // cp = 2 of 256 tokens, rank 1
  EXPECT_EQ(rope_unsupported_reason(s), "");
  s.positions = SequencePositions{60, {64, 192}};
  EXPECT_EQ(rope_unsupported_reason(s),
            "positions: chunk_tokens 60, chunk_start {64, 192}: two chunks must hold the seq (128) local tokens, "
            "chunk_tokens = seq / 2");
  s.positions = SequencePositions{64, {64, 100}};
  EXPECT_EQ(rope_unsupported_reason(s), "positions: chunk_tokens 64, chunk_start {64, 100}: the two chunks overlap");
  s.positions = SequencePositions{64, {0, 16777200}};
  EXPECT_EQ(rope_unsupported_reason(s),
            "positions reach 16777264: at most 16777216 (positions are exact in fp32 up to 2^24)");
}

TEST(RopeArguments, LaunchersThrowBeforeLaunching) {
  alignas(16) Bf16 buffer[16];
  const RopeShape ok{1, 1, 1, 1, 2, 8};
  try {
    rope_forward(buffer, RopeShape{1, 1, 1, 1, 3, 8}, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "rope_forward: head_dim (3) must be even and in [2, 256]");
  }
  try {
    rope_backward(buffer + 1, ok, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "rope_backward: dqkv must be 16-byte aligned (16-byte vector accesses)");
  }
  try {
    rope_forward(nullptr, ok, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "rope_forward: qkv must not be null");
  }
}

}  // namespace
}  // namespace sextant::kernels
