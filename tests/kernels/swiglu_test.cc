// SwiGLU forward/backward against a double-precision CPU reference of
// Megatron's [gate | up] layout. Tolerances: rtol 1e-2, atol 1e-3 for the bf16
// outputs (fp32 arithmetic with expf, ~1e-6 absolute, then one bf16 rounding,
// <= 2^-9 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/swiglu.h"
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

double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

class SwigluTest : public testing::GpuTestWithParam<Shape> {};

TEST_P(SwigluTest, ForwardMatchesReference) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto inp = testing::random_bf16(rng(), 2 * n, 0.0, 2.0);
  DeviceBuffer<Bf16> d_inp(inp), d_out(n);

  swiglu_forward(d_out.get(), d_inp.get(), rows, cols, nullptr);

  const auto in = to_double(inp);
  std::vector<double> want(n);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double gate = in[static_cast<std::size_t>(r) * 2 * cols + c];
      const double up = in[static_cast<std::size_t>(r) * 2 * cols + cols + c];
      want[static_cast<std::size_t>(r) * cols + c] = gate * sigmoid(gate) * up;
    }
  EXPECT_TRUE(all_close(to_double(d_out.download()), want, 1e-2, 1e-3));
}

TEST_P(SwigluTest, BackwardMatchesReference) {
  const auto [rows, cols] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const auto inp = testing::random_bf16(rng(), 2 * n, 0.0, 2.0);
  const auto dout = testing::random_bf16(rng(), n, 0.0, 1.0);
  DeviceBuffer<Bf16> d_inp(inp), d_dout(dout), d_dinp(2 * n);

  swiglu_backward(d_dinp.get(), d_dout.get(), d_inp.get(), rows, cols, nullptr);

  const auto in = to_double(inp), dy = to_double(dout);
  std::vector<double> want(2 * n);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::size_t g = static_cast<std::size_t>(r) * 2 * cols + c;
      const double gate = in[g], up = in[g + cols], s = sigmoid(gate);
      const double d = dy[static_cast<std::size_t>(r) * cols + c];
      want[g] = d * up * (s + gate * s * (1.0 - s));
      want[g + cols] = d * gate * s;
    }
  EXPECT_TRUE(all_close(to_double(d_dinp.download()), want, 1e-2, 1e-3));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwigluTest,
                         ::testing::Values(Shape{1, 8}, Shape{3, 264}, Shape{64, 2816},
                                           Shape{17, 5632}),
                         shape_name);

}  // namespace
}  // namespace sextant::kernels
