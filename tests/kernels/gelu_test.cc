// GELU (tanh approximation) with fused bias, forward and backward, against a
// double-precision CPU reference of Megatron's formula.
// Tolerances: bf16 outputs rtol 1e-2, atol 1e-3 (fp32 arithmetic with tanhf,
// ~1e-6 absolute, then one bf16 rounding, <= 2^-9 relative); dbias 1e-5
// relative to the sum of the magnitudes of its terms (fp32 sums of at most
// 8 + 8 + 3 chained additions per partial, see layernorm_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/gelu.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int rows;
  int cols;
  bool bias;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "rows" + std::to_string(info.param.rows) + "_cols" + std::to_string(info.param.cols) +
         (info.param.bias ? "_bias" : "_nobias");
}

const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);

double gelu(double u) { return 0.5 * u * (1.0 + std::tanh(kSqrt2OverPi * (u + 0.044715 * u * u * u))); }

double gelu_derivative(double u) {
  const double t = std::tanh(kSqrt2OverPi * (u + 0.044715 * u * u * u));
  return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * u * u);
}

class GeluTest : public testing::GpuTestWithParam<Case> {};

TEST_P(GeluTest, ForwardMatchesReference) {
  const auto [rows, cols, with_bias] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.0, 2.0);
  const auto bias = testing::random_bf16(rng(), cols, 0.0, 0.5);
  DeviceBuffer<Bf16> d_x(x), d_bias(bias), d_out(n);

  gelu_forward(d_out.get(), d_x.get(), with_bias ? d_bias.get() : nullptr, rows, cols, nullptr);

  const auto xd = to_double(x), bd = to_double(bias);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = gelu(xd[i] + (with_bias ? bd[i % cols] : 0.0));
  EXPECT_TRUE(all_close(to_double(d_out.download()), want, 1e-2, 1e-3));
}

TEST_P(GeluTest, BackwardMatchesReferenceAndAccumulates) {
  const auto [rows, cols, with_bias] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.0, 2.0);
  const auto bias = testing::random_bf16(rng(), cols, 0.0, 0.5);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto dbias0 = testing::random_float(rng(), cols, 0.0, 1.0);
  DeviceBuffer<Bf16> d_x(x), d_bias(bias), d_dout(dout), d_dinp(n);
  DeviceBuffer<float> d_dbias(dbias0);
  const std::size_t ws_bytes = gelu_backward_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);

  gelu_backward(d_dinp.get(), with_bias ? d_dbias.get() : nullptr, d_dout.get(), d_x.get(),
                with_bias ? d_bias.get() : nullptr, rows, cols, d_ws.get(), ws_bytes, nullptr);

  const auto xd = to_double(x), bd = to_double(bias), dyd = to_double(dout);
  std::vector<double> dinp(n), dbias(dbias0.begin(), dbias0.end()), dbias_atol(cols);
  for (int c = 0; c < cols; ++c) dbias_atol[c] = std::abs(dbias0[c]);
  for (std::size_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % cols);
    dinp[i] = dyd[i] * gelu_derivative(xd[i] + (with_bias ? bd[c] : 0.0));
    dbias[c] += dinp[i];
    dbias_atol[c] += std::abs(dinp[i]);
  }
  for (auto& a : dbias_atol) a *= 1e-5;
  EXPECT_TRUE(all_close(to_double(d_dinp.download()), dinp, 1e-2, 1e-3)) << "dinp";
  if (with_bias) {
    EXPECT_TRUE(all_close(to_double(d_dbias.download()), dbias, 0.0, dbias_atol)) << "dbias";
  } else {
    EXPECT_EQ(d_dbias.download(), dbias0) << "dbias must be untouched without a bias";
  }
}

// 264 columns = one full 256-column tile and one of 8; 129 rows = two full
// chunks of 64 rows and one of 1; 8192 = a GPT-1.3B FFN width.
INSTANTIATE_TEST_SUITE_P(Shapes, GeluTest,
                         ::testing::Values(Case{1, 8, true}, Case{5, 264, true},
                                           Case{129, 1024, true}, Case{64, 8192, true},
                                           Case{33, 264, false}),
                         case_name);

}  // namespace
}  // namespace sextant::kernels
