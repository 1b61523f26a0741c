// fill_normal, its host twin standard_normal_at, and convert_to_bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/parameter_init.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;

TEST(ParameterInitHost, NormalDeviatesHaveUnitVarianceAndDifferByStream) {
  double sum = 0, squares = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double x = standard_normal_at(7, 3, static_cast<std::uint64_t>(i));
    sum += x;
    squares += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.015);  // about 5 standard errors (1 / sqrt(n) = 0.0032)
  EXPECT_NEAR(squares / n, 1.0, 0.025);  // about 5 standard errors (sqrt(2 / n) = 0.0045)
  EXPECT_NE(standard_normal_at(7, 3, 0), standard_normal_at(7, 4, 0));
  EXPECT_NE(standard_normal_at(7, 3, 0), standard_normal_at(8, 3, 0));
  EXPECT_EQ(standard_normal_at(7, 3, 5), standard_normal_at(7, 3, 5));
}

class ParameterInitTest : public testing::GpuTest {};

TEST_F(ParameterInitTest, DeviceMatchesTheHostFormulaToOneUlp) {
  const std::size_t n = 1000003;
  DeviceBuffer<float> d(n);
  fill_normal(d.get(), n, 0.5f, 0.02f, 11, 9, nullptr);
  const std::vector<float> got = d.download();
  for (std::size_t i = 0; i < n; i += 997) {
    const float want = 0.5f + 0.02f * standard_normal_at(11, 9, i);
    ASSERT_NEAR(got[i], want, 2 * std::abs(want) * 1.2e-7f) << i;
  }
  DeviceBuffer<Bf16> b(n);
  convert_to_bf16(b.get(), d.get(), n, nullptr);
  const std::vector<Bf16> rounded = b.download();
  for (std::size_t i = 0; i < n; i += 991) ASSERT_EQ(rounded[i].bits, from_float(got[i]).bits) << i;
}

// A tensor-parallel shard drawn block by block holds exactly the whole
// tensor's values there: a (12, 10) tensor whose rank 1 of tp = 2 holds rows
// [2, 4) of block 0 (rows 0-3) and [8, 12) of block 1 (rows 4-11), written
// back to back; and a column block, columns [5, 10) of every row.
TEST_F(ParameterInitTest, BlocksAreTheWholeTensorsValues) {
  const std::size_t rows = 12, cols = 10;
  DeviceBuffer<float> whole(rows * cols), shard(6 * cols), column(rows * 5);
  fill_normal(whole.get(), rows * cols, 0.0f, 0.02f, 5, 3, nullptr);
  fill_normal_block(shard.get(), cols, 2, cols, cols, 2, 0, 0.0f, 0.02f, 5, 3, nullptr);
  fill_normal_block(shard.get() + 2 * cols, cols, 4, cols, cols, 8, 0, 0.0f, 0.02f, 5, 3, nullptr);
  fill_normal_block(column.get(), 5, rows, 5, cols, 0, 5, 0.0f, 0.02f, 5, 3, nullptr);
  const std::vector<float> w = whole.download(), s = shard.download(), c = column.download();
  for (std::size_t j = 0; j < cols; ++j) {
    for (std::size_t i = 0; i < 2; ++i) ASSERT_EQ(s[i * cols + j], w[(2 + i) * cols + j]) << i << "," << j;
    for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(s[(2 + i) * cols + j], w[(8 + i) * cols + j]) << i << "," << j;
  }
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < 5; ++j) ASSERT_EQ(c[i * 5 + j], w[i * cols + 5 + j]) << i << "," << j;
}

}  // namespace
}  // namespace sextant::kernels
