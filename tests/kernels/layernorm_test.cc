// LayerNorm forward/backward against a double-precision CPU reference.
//
// Tolerances:
// - bf16 outputs (out, dinp): rtol 1e-2, atol 1e-3. The kernel computes in fp32
//   (relative error ~1e-6 on values of order 1) and rounds once to bf16, at most
//   half an ulp = 2^-9 = 0.2 % relative; atol covers values near zero, where
//   only the ~1e-6 absolute fp32 error is left.
// - fp32 statistics and parameter gradients: 1e-5 relative to the sum of
//   magnitudes of the terms. A floating-point sum of terms t errs by at most
//   (chain of additions) * 2^-24 * sum |t|, and by about sqrt(chain) * 2^-24 *
//   sum |t| for random terms; the longest chain here is 384 additions (a lane's
//   share of a 12288-wide row), so ~1.2e-6 * sum |t|, a margin of 8.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/layernorm.h"
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

constexpr float kEps = 1e-5f;

struct Reference {
  std::vector<double> out, mean, rstd, mean_abs;
};

Reference reference_forward(const std::vector<double>& x, const std::vector<double>& gamma,
                            const std::vector<double>& beta, int rows, int cols) {
  Reference r{std::vector<double>(x.size()), std::vector<double>(rows), std::vector<double>(rows),
              std::vector<double>(rows)};
  for (int i = 0; i < rows; ++i) {
    const double* row = &x[static_cast<std::size_t>(i) * cols];
    double sum = 0, abs_sum = 0;
    for (int c = 0; c < cols; ++c) sum += row[c], abs_sum += std::abs(row[c]);
    const double mean = sum / cols;
    double var = 0;
    for (int c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= cols;  // population variance, as PyTorch's layer_norm
    const double rstd = 1.0 / std::sqrt(var + kEps);
    for (int c = 0; c < cols; ++c)
      r.out[static_cast<std::size_t>(i) * cols + c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
    r.mean[i] = mean;
    r.rstd[i] = rstd;
    r.mean_abs[i] = abs_sum / cols;
  }
  return r;
}

class LayerNormTest : public testing::GpuTestWithParam<Shape> {};

TEST_P(LayerNormTest, ForwardMatchesReference) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  // A mean of 3 against a spread of 1 checks the two-pass variance.
  const auto x = testing::random_bf16(rng(), n, 3.0, 1.0);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  const auto beta = testing::random_bf16(rng(), cols, 0.0, 0.1);
  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_beta(beta), d_out(n);
  DeviceBuffer<float> d_mean(rows), d_rstd(rows);

  layernorm_forward(d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(), d_gamma.get(),
                    d_beta.get(), rows, cols, kEps, nullptr);

  const Reference want = reference_forward(to_double(x), to_double(gamma), to_double(beta), rows, cols);
  EXPECT_TRUE(all_close(to_double(d_out.download()), want.out, 1e-2, 1e-3)) << "out";
  std::vector<double> mean_atol(rows);
  for (int i = 0; i < rows; ++i) mean_atol[i] = 1e-5 * want.mean_abs[i];
  EXPECT_TRUE(all_close(to_double(d_mean.download()), want.mean, 0.0, mean_atol)) << "mean";
  EXPECT_TRUE(all_close(to_double(d_rstd.download()), want.rstd, 1e-5, 0.0)) << "rstd";
}

TEST_P(LayerNormTest, BackwardMatchesReferenceAndAccumulates) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.5, 2.0);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  const auto beta = testing::random_bf16(rng(), cols, 0.0, 0.1);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  // Gradients accumulate (+=): start from non-zero values.
  const auto dgamma0 = testing::random_float(rng(), cols, 0.0, 1.0);
  const auto dbeta0 = testing::random_float(rng(), cols, 0.0, 1.0);

  // Statistics as the forward saves them: fp32. The reference uses the same values.
  const Reference fwd = reference_forward(to_double(x), to_double(gamma), to_double(beta), rows, cols);
  std::vector<float> mean(rows), rstd(rows);
  for (int i = 0; i < rows; ++i) {
    mean[i] = static_cast<float>(fwd.mean[i]);
    rstd[i] = static_cast<float>(fwd.rstd[i]);
  }

  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_dout(dout), d_dinp(n);
  DeviceBuffer<float> d_mean(mean), d_rstd(rstd), d_dgamma(dgamma0), d_dbeta(dbeta0);
  const std::size_t ws_bytes = layernorm_backward_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);

  layernorm_backward(d_dinp.get(), d_dgamma.get(), d_dbeta.get(), d_dout.get(), d_x.get(),
                     d_gamma.get(), d_mean.get(), d_rstd.get(), rows, cols, d_ws.get(), ws_bytes,
                     nullptr);

  const auto xd = to_double(x), gd = to_double(gamma), dyd = to_double(dout);
  std::vector<double> dinp(n), dgamma(cols), dbeta(cols), dgamma_scale(cols), dbeta_scale(cols);
  for (int c = 0; c < cols; ++c) {
    dgamma[c] = dgamma0[c], dbeta[c] = dbeta0[c];
    dgamma_scale[c] = std::abs(dgamma0[c]), dbeta_scale[c] = std::abs(dbeta0[c]);
  }
  for (int i = 0; i < rows; ++i) {
    const std::size_t o = static_cast<std::size_t>(i) * cols;
    const double m = mean[i], r = rstd[i];
    double mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (int c = 0; c < cols; ++c) {
      const double xhat = (xd[o + c] - m) * r, dxhat = dyd[o + c] * gd[c];
      mean_dxhat += dxhat, mean_dxhat_xhat += dxhat * xhat;
      dgamma[c] += dyd[o + c] * xhat, dgamma_scale[c] += std::abs(dyd[o + c] * xhat);
      dbeta[c] += dyd[o + c], dbeta_scale[c] += std::abs(dyd[o + c]);
    }
    mean_dxhat /= cols, mean_dxhat_xhat /= cols;
    for (int c = 0; c < cols; ++c) {
      const double xhat = (xd[o + c] - m) * r, dxhat = dyd[o + c] * gd[c];
      dinp[o + c] = r * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  for (int c = 0; c < cols; ++c) dgamma_scale[c] *= 1e-5, dbeta_scale[c] *= 1e-5;

  EXPECT_TRUE(all_close(to_double(d_dinp.download()), dinp, 1e-2, 1e-3)) << "dinp";
  EXPECT_TRUE(all_close(to_double(d_dgamma.download()), dgamma, 0.0, dgamma_scale)) << "dgamma";
  EXPECT_TRUE(all_close(to_double(d_dbeta.download()), dbeta, 0.0, dbeta_scale)) << "dbeta";
}

TEST_P(LayerNormTest, BackwardIsDeterministicAndMayRunInPlace) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto mean = testing::random_float(rng(), rows, 0.0, 0.1);
  const auto rstd = testing::random_float(rng(), rows, 1.0, 0.1);
  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_dout(dout), d_dinp(n);
  DeviceBuffer<float> d_mean(mean), d_rstd(rstd), d_dgamma(cols), d_dbeta(cols);
  const std::size_t ws_bytes = layernorm_backward_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);

  std::vector<std::vector<float>> dgammas;
  for (int run = 0; run < 2; ++run) {
    d_dgamma.upload(std::vector<float>(cols, 0.0f));
    d_dbeta.upload(std::vector<float>(cols, 0.0f));
    layernorm_backward(d_dinp.get(), d_dgamma.get(), d_dbeta.get(), d_dout.get(), d_x.get(),
                       d_gamma.get(), d_mean.get(), d_rstd.get(), rows, cols, d_ws.get(), ws_bytes,
                       nullptr);
    dgammas.push_back(d_dgamma.download());
  }
  EXPECT_EQ(dgammas[0], dgammas[1]) << "dgamma differs between two identical runs";

  // In place (dinp = dout) gives the same dinp and parameter gradients.
  const auto dinp = d_dinp.download();
  d_dgamma.upload(std::vector<float>(cols, 0.0f));
  layernorm_backward(d_dout.get(), d_dgamma.get(), d_dbeta.get(), d_dout.get(), d_x.get(),
                     d_gamma.get(), d_mean.get(), d_rstd.get(), rows, cols, d_ws.get(), ws_bytes,
                     nullptr);
  const auto in_place = d_dout.download();
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(in_place[i].bits, dinp[i].bits) << "element " << i;
  EXPECT_EQ(d_dgamma.download(), dgammas[0]);
}

// The engine's fused form: the residual stream's gradient added in place
// (residual_grad = dinp) and parameter gradients written over stale values
// (the first micro-batch of a step) give the plain call's results.
TEST_P(LayerNormTest, BackwardAddsResidualGradientAndWritesParameterGradients) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto x = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto gamma = testing::random_bf16(rng(), cols, 1.0, 0.1);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto residual = testing::random_bf16(rng(), n, 0.0, 1.0);
  const auto mean = testing::random_float(rng(), rows, 0.0, 0.1);
  const auto rstd = testing::random_float(rng(), rows, 1.0, 0.1);
  DeviceBuffer<Bf16> d_x(x), d_gamma(gamma), d_dout(dout), d_dinp(n);
  DeviceBuffer<float> d_mean(mean), d_rstd(rstd), d_dgamma(std::vector<float>(cols, 0.0f)),
      d_dbeta(std::vector<float>(cols, 0.0f));
  const std::size_t ws_bytes = layernorm_backward_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);
  layernorm_backward(d_dinp.get(), d_dgamma.get(), d_dbeta.get(), d_dout.get(), d_x.get(),
                     d_gamma.get(), d_mean.get(), d_rstd.get(), rows, cols, d_ws.get(), ws_bytes,
                     nullptr);
  const auto plain = to_double(d_dinp.download());
  const auto dgamma = d_dgamma.download(), dbeta = d_dbeta.download();

  d_dinp.upload(residual);
  d_dgamma.upload(std::vector<float>(cols, 7.0f));  // stale: must be overwritten
  d_dbeta.upload(std::vector<float>(cols, -3.0f));
  NormBackwardOptions options;
  options.residual_grad = d_dinp.get();
  options.accumulate_param_grads = false;
  // Rows up to kNormBackwardMaxSummedCols also give dinp's column sums (the
  // next bias gradient), written over a stale value.
  const bool sums = cols <= kNormBackwardMaxSummedCols;
  DeviceBuffer<float> d_sums(std::vector<float>(cols, 5.0f));
  if (sums) options.dinp_column_sums = d_sums.get();
  layernorm_backward(d_dinp.get(), d_dgamma.get(), d_dbeta.get(), d_dout.get(), d_x.get(),
                     d_gamma.get(), d_mean.get(), d_rstd.get(), rows, cols, d_ws.get(), ws_bytes,
                     nullptr, options);

  std::vector<double> want(n);
  const auto res = to_double(residual);
  for (std::size_t i = 0; i < n; ++i) want[i] = plain[i] + res[i];
  // Two bf16 roundings (the plain result, then the sum) instead of one.
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
  EXPECT_EQ(d_dbeta.download(), dbeta);
}

// cols: one vector (8), a GPT-2 width (768), a width that is not a multiple of
// the 256-column tile (1032), wide rows (4096, 12288); rows: partial blocks of
// 8 rows and partial chunks of 64 rows (130 = 2 x 64 + 2).
// The fused backward (cols <= 4096) gives each thread 8 columns and splits a
// chunk's rows over teams of cols / 8 threads rounded up to whole warps, as
// many as fit in 512 threads: 8 teams of one warp (8), 5 of 96 threads (768),
// 3 of 160 (1032), 2 of 256 (GPT-1.3B's 2048), one of 320 (2560), one of 512
// with its last thread idle (4088) and all busy (4096). Rows come 2 at a time
// per team: odd row counts (7, 67, 201) end chunks on a partial group.
INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormTest,
                         ::testing::Values(Shape{1, 8}, Shape{7, 768}, Shape{64, 1032},
                                           Shape{130, 2048}, Shape{201, 2560}, Shape{67, 4088},
                                           Shape{130, 4096}, Shape{3, 12288}),
                         shape_name);

TEST(LayerNormArguments, RejectsColsNotMultipleOf8BeforeLaunching) {
  try {
    layernorm_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 4, 12, kEps, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "layernorm_forward: cols (12) must be a positive multiple of 8 (16-byte vector "
                 "accesses)");
  }
}

TEST(LayerNormArguments, RejectsSmallWorkspaceBeforeLaunching) {
  // Host memory stands in for device pointers: the launcher checks before it touches them.
  alignas(16) static float f[16];
  alignas(16) static Bf16 h[16];
  try {
    layernorm_backward(h, f, f, h, h, h, f, f, 64, 64, h, 16, nullptr);
    FAIL() << "expected KernelArgumentError";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "layernorm_backward: workspace (16 bytes) is smaller than the 768 bytes "
                 "layernorm_backward_workspace_bytes asks for");
  }
}

}  // namespace
}  // namespace sextant::kernels
