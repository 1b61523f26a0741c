// RMSNorm forward/backward against a double-precision CPU reference.
// Tolerances and their reasons are layernorm_test.cc's: bf16 outputs rtol 1e-2
// and atol 1e-3 (one bf16 rounding of an fp32 result), fp32 rstd 1e-5
// relative, dgamma 1e-5 relative to the sum of the magnitudes of its terms.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/rmsnorm.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Shape {
  int rows;
  int cols;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  return "rows" + std::to_string(info.param.rows) + "_cols" + std::to_string(info.param.cols);
}

constexpr float kEps = 1e-6f;  // Llama's rms_norm_eps

class RmsNormTest : public testing::GpuTestWithParam<Shape> {};

TEST_P(RmsNormTest, ForwardMatchesReference) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.2, 1.5);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_out(n);
  DeviceBuffer<float> d_rstd(rows);

  rmsnorm_forward(d_out.get(), d_rstd.get(), d_x.get(), d_gamma.get(), rows, cols, kEps, nullptr);

  const auto xd = to_double(x), gd = to_double(gamma);
  std::vector<double> out(n), rstd(rows);
  for (int i = 0; i < rows; ++i) {
    const std::size_t o = static_cast<std::size_t>(i) * cols;
    double squares = 0;
    for (int c = 0; c < cols; ++c) squares += xd[o + c] * xd[o + c];
    rstd[i] = 1.0 / std::sqrt(squares / cols + kEps);
    for (int c = 0; c < cols; ++c) out[o + c] = xd[o + c] * rstd[i] * gd[c];
  }
  EXPECT_TRUE(all_close(to_double(d_out.download()), out, 1e-2, 1e-3)) << "out";
  EXPECT_TRUE(all_close(to_double(d_rstd.download()), rstd, 1e-5, 0.0)) << "rstd";
}

TEST_P(RmsNormTest, BackwardMatchesReferenceAndAccumulates) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.2, 1.5);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto dgamma0 = testing::random_float(rng(), cols, 0.0, 1.0);
  const auto xd = to_double(x), gd = to_double(gamma), dyd = to_double(dout);
  std::vector<float> rstd(rows);
  for (int i = 0; i < rows; ++i) {
    double squares = 0;
    for (int c = 0; c < cols; ++c) squares += xd[static_cast<std::size_t>(i) * cols + c] *
                                              xd[static_cast<std::size_t>(i) * cols + c];
    rstd[i] = static_cast<float>(1.0 / std::sqrt(squares / cols + kEps));
  }
  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_dout(dout), d_dinp(n);
  DeviceBuffer<float> d_rstd(rstd), d_dgamma(dgamma0);
  const std::size_t ws_bytes = rmsnorm_backward_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);

  rmsnorm_backward(d_dinp.get(), d_dgamma.get(), d_dout.get(), d_x.get(), d_gamma.get(),
                   d_rstd.get(), rows, cols, d_ws.get(), ws_bytes, nullptr);

  std::vector<double> dinp(n), dgamma(dgamma0.begin(), dgamma0.end()), dgamma_atol(cols);
  for (int c = 0; c < cols; ++c) dgamma_atol[c] = std::abs(dgamma0[c]);
  for (int i = 0; i < rows; ++i) {
    const std::size_t o = static_cast<std::size_t>(i) * cols;
    const double r = rstd[i];
    double mean_dxhat_xhat = 0;
    for (int c = 0; c < cols; ++c) {
      const double xhat = xd[o + c] * r;
      mean_dxhat_xhat += dyd[o + c] * gd[c] * xhat;
      dgamma[c] += dyd[o + c] * xhat;
      dgamma_atol[c] += std::abs(dyd[o + c] * xhat);
    }
    mean_dxhat_xhat /= cols;
    for (int c = 0; c < cols; ++c)
      dinp[o + c] = r * (dyd[o + c] * gd[c] - xd[o + c] * r * mean_dxhat_xhat);
  }
  for (auto& a : dgamma_atol) a *= 1e-5;
  EXPECT_TRUE(all_close(to_double(d_dinp.download()), dinp, 1e-2, 1e-3)) << "dinp";
  EXPECT_TRUE(all_close(to_double(d_dgamma.download()), dgamma, 0.0, dgamma_atol)) << "dgamma";
}

// As LayerNormTest's fused-form test: residual added in place, dgamma written.
TEST_P(RmsNormTest, BackwardAddsResidualGradientAndWritesParameterGradients) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.2, 1.5);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto residual = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto rstd = testing::random_float(rng(), rows, 1.0, 0.1);
  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_dout(dout), d_dinp(n);
  DeviceBuffer<float> d_rstd(rstd), d_dgamma(std::vector<float>(cols, 0.0f));
  const std::size_t ws_bytes = rmsnorm_backward_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);
  rmsnorm_backward(d_dinp.get(), d_dgamma.get(), d_dout.get(), d_x.get(), d_gamma.get(),
                   d_rstd.get(), rows, cols, d_ws.get(), ws_bytes, nullptr);
  const auto plain = to_double(d_dinp.download());
  const auto dgamma = d_dgamma.download();

  d_dinp.upload(residual);
  d_dgamma.upload(std::vector<float>(cols, 7.0f));
  NormBackwardOptions options;
  options.residual_grad = d_dinp.get();
  options.accumulate_param_grads = false;
  // Rows up to kNormBackwardMaxSummedCols also give dinp's column sums (the
  // next bias gradient), written over a stale value.
  const bool sums = cols <= kNormBackwardMaxSummedCols;
  DeviceBuffer<float> d_sums(std::vector<float>(cols, 5.0f));
  if (sums) options.dinp_column_sums = d_sums.get();
  rmsnorm_backward(d_dinp.get(), d_dgamma.get(), d_dout.get(), d_x.get(), d_gamma.get(),
                   d_rstd.get(), rows, cols, d_ws.get(), ws_bytes, nullptr, options);

  std::vector<double> want(n);
  const auto res = to_double(residual);
  for (std::size_t i = 0; i < n; ++i) want[i] = plain[i] + res[i];
  const auto dinp = to_double(d_dinp.download());
  EXPECT_TRUE(all_close(dinp, want, 1e-2, 1e-2)) << "dinp + residual";
  if (sums) {
    // The kernel sums fp32 values before their rounding to bf16: each term
    // differs from the downloaded one by at most 2^-9 of it.
    std::vector<double> column(cols, 0.0), atol(cols, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      column[i % cols] += dinp[i];
      atol[i % cols] += std::ldexp(std::abs(dinp[i]), -8);
    }
    EXPECT_TRUE(all_close(to_double(d_sums.download()), column, 0.0, atol)) << "dinp column sums";
  }
  EXPECT_EQ(d_dgamma.download(), dgamma);
}

// The fused backward's team shapes (layernorm_test.cc) for RMSNorm: 8 teams of
// 64 threads, 31 of them idle (264 columns are 33 vectors), 4 teams of 128
// (1024), 2 of 256 (2048), one of 512 (4096); odd row counts end on a partial group.
INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(Shape{1, 8}, Shape{9, 264}, Shape{77, 1024},
                                           Shape{130, 2048}, Shape{67, 4096}, Shape{5, 8192}),
                         shape_name);

}  // namespace
}  // namespace sextant::kernels
