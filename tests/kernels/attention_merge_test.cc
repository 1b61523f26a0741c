// kernels/attention_merge.h against a CPU merge in double: the first
// contribution alone, then a second one merged in, with rows whose LSE is -inf
// (no key seen) in either or both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "kernels/attention_merge.h"
#include "kernels/cuda_check.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// The merge of attention_merge.h's comment, in double, in place.
void merge_reference(std::vector<double>& out, std::vector<double>& lse, const std::vector<double>& part_out,
                     const std::vector<double>& part_lse, const AttentionMergeShape& s, bool first) {
  for (int r = 0; r < s.rows; ++r)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t li = static_cast<std::size_t>(h) * s.rows + r;
      const double l_acc = first ? kNegInf : lse[li], l_part = part_lse[li];
      const double m = std::max(l_acc, l_part);
      double w_acc = 0, w_part = 0, l = kNegInf;
      if (m != kNegInf) {
        l = m + std::log(std::exp(l_acc - m) + std::exp(l_part - m));
        w_acc = std::exp(l_acc - l);
        w_part = std::exp(l_part - l);
      }
      for (int c = 0; c < s.head_dim; ++c) {
        const std::size_t e = (static_cast<std::size_t>(r) * s.heads + h) * s.head_dim + c;
        out[e] = (first ? 0.0 : w_acc * out[e]) + w_part * part_out[e];
      }
      lse[li] = l;
    }
}

/// Splits `lse` into its finite entries (for all_close) and whether each is -inf.
void expect_lse(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<double> got_finite, want_finite;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::isinf(got[i]), std::isinf(want[i])) << "lse " << i << ": " << got[i] << " vs " << want[i];
    if (std::isinf(want[i])) {
      EXPECT_LT(got[i], 0.f) << "lse " << i;
      continue;
    }
    got_finite.push_back(got[i]);
    want_finite.push_back(want[i]);
  }
  // fp32 expf / logf of O(1) arguments: a few ulps of |L| <= 10, plus 1e-6.
  EXPECT_TRUE(all_close(got_finite, want_finite, 1e-6, 1e-6)) << "lse";
}

class AttentionMergeTest : public testing::GpuTestWithParam<AttentionMergeShape> {};

// Two contributions; rows r % 5 == 1 see no key in the first, r % 5 == 2 none in the
// second, r % 5 == 3 none in either. Out and LSE in fp32 against double: the
// weights carry a few ulps (fp32 expf, logf, division), |O| <= max |part| ~ 4:
// rtol 1e-5, atol 1e-5.
TEST_P(AttentionMergeTest, MatchesTheDoubleMerge) {
  const AttentionMergeShape s = GetParam();
  ASSERT_EQ(attention_merge_problem(s), "");
  const std::size_t n = static_cast<std::size_t>(s.rows) * s.heads * s.head_dim;
  const std::size_t pairs = static_cast<std::size_t>(s.rows) * s.heads;
  auto part_lse = [&](int which) {
    std::vector<float> lse = testing::random_float(rng(), pairs, 2.0, 3.0);
    for (std::size_t i = 0; i < pairs; ++i) {
      const int row = static_cast<int>(i % s.rows);
      if (row % 5 == 3 || row % 5 == which) lse[i] = -std::numeric_limits<float>::infinity();
    }
    return lse;
  };
  const std::vector<Bf16> out1 = testing::random_bf16(rng(), n, 0.0, 1.0);
  const std::vector<Bf16> out2 = testing::random_bf16(rng(), n, 0.0, 1.0);
  const std::vector<float> lse1 = part_lse(1), lse2 = part_lse(2);
  // The accumulator starts as garbage: `first` must ignore it.
  DeviceBuffer<float> d_out(testing::random_float(rng(), n, 0.0, 100.0));
  DeviceBuffer<float> d_lse(testing::random_float(rng(), pairs, 0.0, 100.0));
  DeviceBuffer<Bf16> d_part1(out1), d_part2(out2);
  DeviceBuffer<float> d_lse1(lse1), d_lse2(lse2);

  std::vector<double> out(n, 0.0), lse(pairs, 0.0);
  merge_attention_partial(d_out.get(), d_lse.get(), d_part1.get(), d_lse1.get(), s, true, nullptr);
  merge_reference(out, lse, to_double(out1), to_double(lse1), s, true);
  EXPECT_TRUE(all_close(to_double(d_out.download()), out, 1e-5, 1e-5)) << "out after first";
  expect_lse(d_lse.download(), lse);

  merge_attention_partial(d_out.get(), d_lse.get(), d_part2.get(), d_lse2.get(), s, false, nullptr);
  merge_reference(out, lse, to_double(out2), to_double(lse2), s, false);
  EXPECT_TRUE(all_close(to_double(d_out.download()), out, 1e-5, 1e-5)) << "out after second";
  expect_lse(d_lse.download(), lse);
}

// head_dim 64 and 128 (256 / d pairs per block), 8 (32 pairs), 512 (one pair
// of 512 threads); row counts that leave the last block partial.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionMergeTest,
                         ::testing::Values(AttentionMergeShape{100, 4, 64}, AttentionMergeShape{37, 3, 128},
                                           AttentionMergeShape{50, 2, 8}, AttentionMergeShape{5, 3, 512}),
                         [](const ::testing::TestParamInfo<AttentionMergeShape>& info) {
                           return "r" + std::to_string(info.param.rows) + "_h" + std::to_string(info.param.heads) +
                                  "_d" + std::to_string(info.param.head_dim);
                         });

TEST(AttentionMergeArguments, ProblemsAreNamed) {
  EXPECT_EQ(attention_merge_problem({1, 1, 8}), "");
  EXPECT_EQ(attention_merge_problem({0, 2, 64}), "rows (0) must be positive");
  EXPECT_EQ(attention_merge_problem({1, 0, 12}),
            "heads (0) must be positive; head_dim (12) must be a positive multiple of 8, at most 1024");
  EXPECT_EQ(attention_merge_problem({1, 1, 1032}), "head_dim (1032) must be a positive multiple of 8, at most 1024");
  EXPECT_THROW(merge_attention_partial(nullptr, nullptr, nullptr, nullptr, {0, 1, 8}, true, nullptr),
               KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
