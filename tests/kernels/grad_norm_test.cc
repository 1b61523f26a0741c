// Global gradient norm and clipping factor against a double-precision CPU
// reference. Tolerance 1e-5 relative: every term is positive, so a fp32 sum's
// relative error is at most (chain of additions) * 2^-24, and the longest
// chain here (one thread's grid-stride share plus a block tree) is well under
// 100 additions (6e-6); sqrt halves the relative error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/grad_norm.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;

class GradNormTest : public testing::GpuTest {
 protected:
  struct Result {
    float sum_squares, norm, scale;
  };

  // Sums the squares of every buffer, then computes the clipping factor.
  Result run(const std::vector<const DeviceBuffer<float>*>& buffers, float max_norm) {
    DeviceBuffer<float> d_sum(std::vector<float>{0.0f}), d_norm(1), d_scale(1);
    const std::size_t ws_bytes = grad_sum_squares_workspace_bytes();
    DeviceBuffer<char> d_ws(ws_bytes);
    for (const auto* b : buffers)
      grad_sum_squares_accumulate(d_sum.get(), b->get(), b->size(), d_ws.get(), ws_bytes, nullptr);
    grad_clip_scale(d_norm.get(), d_scale.get(), d_sum.get(), max_norm, nullptr);
    return {d_sum.download()[0], d_norm.download()[0], d_scale.download()[0]};
  }
};

TEST_F(GradNormTest, SumsSeveralBuffersAndClips) {
  // Sizes: a tail-only buffer, one with a tail of 3, and 2^24 + 5 elements
  // (more than one grid-stride pass of the partial-sum kernel).
  const std::vector<std::size_t> sizes = {5, 4099, (std::size_t{1} << 24) + 5};
  std::vector<std::vector<float>> host;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> device;
  std::vector<const DeviceBuffer<float>*> buffers;
  double sum = 0;
  for (std::size_t n : sizes) {
    host.push_back(testing::random_float(rng(), n, 0.0, 1e-3));
    for (float g : host.back()) sum += static_cast<double>(g) * g;
    device.push_back(std::make_unique<DeviceBuffer<float>>(host.back()));
    buffers.push_back(device.back().get());
  }
  const double norm = std::sqrt(sum);

  const Result clipped = run(buffers, static_cast<float>(norm / 2));
  EXPECT_NEAR(clipped.sum_squares, sum, 1e-5 * sum);
  EXPECT_NEAR(clipped.norm, norm, 1e-5 * norm);
  const double want_scale = (norm / 2) / (norm + 1e-6);  // Megatron's clip_coeff
  EXPECT_NEAR(clipped.scale, want_scale, 1e-5 * want_scale);

  EXPECT_EQ(run(buffers, static_cast<float>(norm * 2)).scale, 1.0f) << "norm below max_norm";
  EXPECT_EQ(run(buffers, 0.0f).scale, 1.0f) << "max_norm 0 means no clipping";
  EXPECT_EQ(run(buffers, 1e-3f).sum_squares, clipped.sum_squares) << "not deterministic";
}

TEST_F(GradNormTest, NonFiniteGradientGivesNonFiniteNormAndNanScale) {
  std::vector<float> g(1000, 1.0f);
  g[500] = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer<float> d_g(g);
  const Result r = run({&d_g}, 1.0f);
  EXPECT_TRUE(std::isnan(r.norm));
  EXPECT_TRUE(std::isnan(r.scale)) << "adamw_update skips the step on a NaN scale";
}

}  // namespace
}  // namespace sextant::kernels
