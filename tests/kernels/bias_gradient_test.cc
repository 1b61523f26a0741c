// bias_gradient against a double-precision sum of the bf16 inputs.
// Tolerance: 1e-5 relative to the sum of the magnitudes of a column's terms
// (fp32 chains of at most 8 + 8 + ceil(rows / 64 / 8) + 8 additions: the
// thread's rows, the row groups, the chunk groups of accumulate_column_partials
// and their total; each adds at most 2^-24 of that magnitude).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/bias_gradient.h"
#include "kernels/cuda_check.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int rows;
  int cols;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "rows" + std::to_string(info.param.rows) + "_cols" + std::to_string(info.param.cols);
}

class BiasGradientTest : public testing::GpuTestWithParam<Case> {};

TEST_P(BiasGradientTest, WritesAndAccumulatesColumnSums) {
  const auto [rows, cols] = GetParam();
  const auto dout = testing::random_bf16(rng(), static_cast<std::size_t>(rows) * cols, 0.1, 1.0);
  const std::vector<float> before = testing::random_float(rng(), static_cast<std::size_t>(cols), 0.0, 1.0);
  const auto d = to_double(dout);
  std::vector<double> sum(cols, 0.0), magnitude(cols, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      sum[c] += d[static_cast<std::size_t>(r) * cols + c];
      magnitude[c] += std::abs(d[static_cast<std::size_t>(r) * cols + c]);
    }
  DeviceBuffer<Bf16> d_dout(dout);
  const std::size_t ws_bytes = bias_gradient_workspace_bytes(rows, cols);
  DeviceBuffer<char> d_ws(ws_bytes);
  for (const bool accumulate : {false, true}) {
    DeviceBuffer<float> d_dbias(before);
    bias_gradient(d_dbias.get(), d_dout.get(), rows, cols, accumulate, d_ws.get(), ws_bytes, nullptr);
    const std::vector<float> got = d_dbias.download();
    for (int c = 0; c < cols; ++c) {
      const double want = sum[c] + (accumulate ? before[c] : 0.0);
      ASSERT_NEAR(got[c], want, 1e-5 * (magnitude[c] + std::abs(before[c])) + 1e-30)
          << "column " << c << (accumulate ? " (accumulate)" : " (write)");
    }
  }
}

// 1 x 8: one vector; 65 x 264: a partial chunk and a partial block of columns;
// 4096 x 6144: GPT-1.3B's QKV gradient at half its micro-batch, 64 chunks.
INSTANTIATE_TEST_SUITE_P(Shapes, BiasGradientTest,
                         ::testing::Values(Case{1, 8}, Case{65, 264}, Case{700, 520}, Case{4096, 6144}),
                         case_name);

TEST(BiasGradientArguments, RejectsBadShapesAndShortWorkspace) {
  float dbias = 0;
  alignas(16) Bf16 dout[8] = {};
  alignas(16) char ws[64] = {};
  EXPECT_THROW(bias_gradient(&dbias, dout, 1, 7, false, ws, sizeof ws, nullptr), KernelArgumentError);
  EXPECT_THROW(bias_gradient(&dbias, dout, -1, 8, false, ws, sizeof ws, nullptr), KernelArgumentError);
  EXPECT_THROW(bias_gradient(&dbias, dout, 1000, 8, false, ws, 16, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
