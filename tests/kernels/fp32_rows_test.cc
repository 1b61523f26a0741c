// kernels/fp32_rows.h against the same arithmetic on the CPU: fp32 sums of
// exactly representable values are bit-identical (one IEEE-754 rounding per
// add on both sides), and bf16 rounding to nearest even is from_float's
// (kernels/bf16.h), so every comparison is exact. Rows are strided on both
// sides, and the columns past `width` must stay untouched.
#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"
#include "kernels/fp32_rows.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;

constexpr float kFill = 12345.f;

std::size_t stride_of(long long stride, int width) { return static_cast<std::size_t>(stride != 0 ? stride : width); }

/// How many elements of `got` differ in bits from `want`.
std::size_t differing(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) n += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]);
  return n;
}

class Fp32RowsTest : public testing::GpuTestWithParam<RowBlock> {};

TEST_P(Fp32RowsTest, AccumulatesBf16Rows) {
  const RowBlock b = GetParam();
  const std::size_t dst_stride = stride_of(b.dst_row_stride, b.width), src_stride = stride_of(b.src_row_stride, b.width);
  const std::vector<float> dst0 = testing::random_float(rng(), b.rows * dst_stride, 0.0, 1.0);
  const std::vector<Bf16> src = testing::random_bf16(rng(), b.rows * src_stride, 0.0, 1.0);
  for (const bool overwrite : {false, true}) {
    DeviceBuffer<float> d_dst(dst0);
    DeviceBuffer<Bf16> d_src(src);
    accumulate_bf16_rows(d_dst.get(), d_src.get(), b, overwrite, nullptr);
    std::vector<float> want = dst0;
    for (long long r = 0; r < b.rows; ++r)
      for (int c = 0; c < b.width; ++c) {
        float& d = want[r * dst_stride + c];
        const float v = to_float(src[r * src_stride + c]);
        d = overwrite ? v : d + v;
      }
    EXPECT_EQ(differing(d_dst.download(), want), 0u) << "overwrite " << overwrite;
  }
}

TEST_P(Fp32RowsTest, StoresBf16RowsRoundedToNearestEven) {
  const RowBlock b = GetParam();
  const std::size_t dst_stride = stride_of(b.dst_row_stride, b.width), src_stride = stride_of(b.src_row_stride, b.width);
  const std::vector<float> src = testing::random_float(rng(), b.rows * src_stride, 0.0, 1.0);
  DeviceBuffer<Bf16> d_dst(std::vector<Bf16>(b.rows * dst_stride, from_float(kFill)));
  DeviceBuffer<float> d_src(src);
  store_bf16_rows(d_dst.get(), d_src.get(), b, nullptr);
  std::vector<Bf16> want(b.rows * dst_stride, from_float(kFill));
  for (long long r = 0; r < b.rows; ++r)
    for (int c = 0; c < b.width; ++c) want[r * dst_stride + c] = from_float(src[r * src_stride + c]);
  const std::vector<Bf16> got = d_dst.download();
  std::size_t n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) n += got[i].bits != want[i].bits;
  EXPECT_EQ(n, 0u);
}

// {rows, width, dst_row_stride, src_row_stride}: contiguous; dK's slice of a
// fused QKV gradient (width 128 of 768-wide rows) from a contiguous source;
// both strided, an odd width.
INSTANTIATE_TEST_SUITE_P(Blocks, Fp32RowsTest,
                         ::testing::Values(RowBlock{300, 256, 0, 0}, RowBlock{257, 128, 768, 0},
                                           RowBlock{33, 37, 41, 50}),
                         [](const ::testing::TestParamInfo<RowBlock>& info) {
                           const RowBlock& b = info.param;
                           return "r" + std::to_string(b.rows) + "_w" + std::to_string(b.width) + "_dst" +
                                  std::to_string(b.dst_row_stride) + "_src" + std::to_string(b.src_row_stride);
                         });

TEST(Fp32RowsArguments, ProblemsAreNamed) {
  EXPECT_EQ(row_block_problem({1, 1, 0, 0}), "");
  EXPECT_EQ(row_block_problem({0, 0, 0, 0}), "rows (0) must be positive; width (0) must be positive");
  EXPECT_EQ(row_block_problem({2, 8, 4, 9}), "dst_row_stride (4) must be 0 or at least width");
  EXPECT_EQ(row_block_problem({2, 8, 0, 7}), "src_row_stride (7) must be 0 or at least width");
  EXPECT_THROW(store_bf16_rows(nullptr, nullptr, {0, 8, 0, 0}, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
