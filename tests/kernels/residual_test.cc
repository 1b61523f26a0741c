// Residual add against a CPU reference. The fp32 sum of two bf16 values is
// exact unless their exponents differ by more than 16, and the kernel rounds it
// once: compared to one bf16 ulp (rtol 2^-8).
#include <gtest/gtest.h>

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

TEST(ResidualArguments, RejectsSizeNotMultipleOf8) {
  EXPECT_THROW(residual_add(nullptr, nullptr, nullptr, 12, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
