// Residual add against a CPU reference. The fp32 sum of two bf16 values is
// exact unless their exponents differ by more than 16, and the kernel rounds it
// once: compared to one bf16 ulp (rtol 2^-8).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/residual.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

class ResidualTest : public testing::GpuTestWithParam<std::size_t> {};

TEST_P(ResidualTest, MatchesReferenceAndRunsInPlace) {
  const std::size_t n = GetParam();
  const auto a = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto b = testing::random_bf16(rng(), n, 0.0, 1.0);
  DeviceBuffer<Bf16> d_a(a), d_b(b), d_out(n);

  residual_add(d_out.get(), d_a.get(), d_b.get(), n, nullptr);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<double>(to_float(a[i])) + to_float(b[i]);
  const auto out = d_out.download();
  EXPECT_TRUE(all_close(to_double(out), want, 1.0 / 256, 0.0));

  residual_add(d_a.get(), d_a.get(), d_b.get(), n, nullptr);  // a += b
  const auto in_place = d_a.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in_place[i].bits, out[i].bits) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, ResidualTest, ::testing::Values(8, 8 * 1001, 4 * 2048 * 768),
                         [](const auto& info) { return "size" + std::to_string(info.param); });

// residual_bias_add: three bf16 terms summed in fp32 and rounded once. The
// fp32 sum of three bf16 values can itself round (their exponents may differ),
// by at most 2^-24 relative to the largest term, far below one output ulp, so
// the bound is one bf16 ulp of the result plus 2^-20 of the terms' sizes.
// Without a bias it is residual_add, bit for bit; in place (out = a) too.
class ResidualBiasTest : public testing::GpuTestWithParam<int> {};

TEST_P(ResidualBiasTest, AddsTheBiasToEveryRow) {
  const int rows = GetParam(), cols = 264;  // 33 vectors of 8 per row
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto a = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto b = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto bias = testing::random_bf16(rng(), cols, 0.0, 1.0);
  DeviceBuffer<Bf16> d_a(a), d_b(b), d_bias(bias), d_out(n), d_plain(n);

  residual_bias_add(d_out.get(), d_a.get(), d_b.get(), d_bias.get(), rows, cols, nullptr);
  std::vector<double> want(n), atol(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = to_float(a[i]), y = to_float(b[i]), z = to_float(bias[i % cols]);
    want[i] = x + y + z;
    atol[i] = (std::abs(x) + std::abs(y) + std::abs(z)) / (1 << 20);
  }
  const auto out = d_out.download();
  EXPECT_TRUE(all_close(to_double(out), want, 1.0 / 256, atol));

  residual_bias_add(d_out.get(), d_a.get(), d_b.get(), nullptr, rows, cols, nullptr);
  residual_add(d_plain.get(), d_a.get(), d_b.get(), n, nullptr);
  const auto no_bias = d_out.download(), plain = d_plain.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(no_bias[i].bits, plain[i].bits) << "element " << i;

  residual_bias_add(d_a.get(), d_a.get(), d_b.get(), d_bias.get(), rows, cols, nullptr);  // a += b + bias
  const auto in_place = d_a.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in_place[i].bits, out[i].bits) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Rows, ResidualBiasTest, ::testing::Values(1, 24, 1000),
                         [](const auto& info) { return "rows" + std::to_string(info.param); });

TEST(ResidualArguments, RejectsSizeNotMultipleOf8) {
  EXPECT_THROW(residual_add(nullptr, nullptr, nullptr, 12, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
