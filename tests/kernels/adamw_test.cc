// AdamW against a double-precision CPU reference of torch.optim.AdamW's update.
// Tolerances (fp32 state): each updated value errs by a few fp32 roundings of
// the terms that make it, so |error| <= 1e-5 * (sum of the magnitudes of those
// terms) with a wide margin (2^-24 = 6e-8 per rounding). The bf16 weights must
// be the round-to-nearest-even of the kernel's own fp32 master, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  std::size_t n;
  bool device_scale;
  int max_blocks = 0;  // adamw_update's grid cap (0: one thread per four elements)
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "size" + std::to_string(info.param.n) + (info.param.device_scale ? "_scaled" : "_unscaled") +
         (info.param.max_blocks > 0 ? "_blocks" + std::to_string(info.param.max_blocks) : "");
}

class AdamWTest : public testing::GpuTestWithParam<Case> {};

TEST_P(AdamWTest, MatchesReference) {
  const auto [n, device_scale, max_blocks] = GetParam();
  const auto master0 = testing::random_float(rng(), n, 0.0, 0.02);
  const auto grads = testing::random_float(rng(), n, 0.0, 1e-2);
  const auto m0 = testing::random_float(rng(), n, 0.0, 1e-2);
  auto v0 = testing::random_float(rng(), n, 0.0, 1e-4);
  for (auto& v : v0) v = v * v;  // second moments are non-negative
  const float scale = 0.5f;       // e.g. a clipping factor
  AdamWStep step;
  step.learning_rate = 3e-4f;
  step.weight_decay = 0.1f;
  step.step = 10;

  DeviceBuffer<float> d_master(master0), d_grads(grads), d_m(m0), d_v(v0),
      d_scale(std::vector<float>{scale});
  DeviceBuffer<Bf16> d_weights(n);
  adamw_update(d_master.get(), d_weights.get(), d_m.get(), d_v.get(), d_grads.get(), n, step,
               device_scale ? d_scale.get() : nullptr, nullptr, max_blocks);

  const double lr = step.learning_rate, b1 = step.beta1, b2 = step.beta2, eps = step.eps,
               wd = step.weight_decay;
  const double bias1 = 1.0 - std::pow(b1, step.step), bias2 = 1.0 - std::pow(b2, step.step);
  std::vector<double> want_p(n), want_m(n), want_v(n), atol_p(n), atol_m(n), atol_v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grads[i]) * (device_scale ? scale : 1.0f);
    want_m[i] = b1 * m0[i] + (1 - b1) * g;
    want_v[i] = b2 * v0[i] + (1 - b2) * g * g;
    const double update = lr / bias1 * want_m[i] / (std::sqrt(want_v[i]) / std::sqrt(bias2) + eps);
    want_p[i] = master0[i] * (1 - lr * wd) - update;
    atol_m[i] = 1e-5 * (std::abs(b1 * m0[i]) + std::abs((1 - b1) * g));
    atol_v[i] = 1e-5 * (std::abs(b2 * v0[i]) + std::abs((1 - b2) * g * g));
    // The update inherits m's and v's errors, relative: ~1e-5 of its size.
    atol_p[i] = 1e-5 * (std::abs(master0[i]) + std::abs(update));
  }
  const auto master = d_master.download();
  EXPECT_TRUE(all_close(to_double(d_m.download()), want_m, 0.0, atol_m)) << "m";
  EXPECT_TRUE(all_close(to_double(d_v.download()), want_v, 0.0, atol_v)) << "v";
  EXPECT_TRUE(all_close(to_double(master), want_p, 0.0, atol_p)) << "master";
  const auto weights = d_weights.download();
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(weights[i].bits, from_float(master[i]).bits) << "element " << i;
}

// n = 1 and 7: only the element-wise tail; 4099: vectors and a tail of 3.
// Capped grids loop: one block of 1024 threads takes 4099 elements in two
// passes (the tail in the second); three blocks take 2^20 in 86 passes.
INSTANTIATE_TEST_SUITE_P(Sizes, AdamWTest,
                         ::testing::Values(Case{1, false}, Case{7, true}, Case{4099, true},
                                           Case{1 << 20, false}, Case{4099, true, 1},
                                           Case{1 << 20, false, 3}),
                         case_name);

// A NaN clip scale (grad_clip_scale's answer to a non-finite gradient norm)
// leaves every state untouched: the skipped step.
TEST_P(AdamWTest, NanScaleSkipsTheUpdate) {
  const std::size_t n = GetParam().n;
  const auto master0 = testing::random_float(rng(), n, 0.0, 0.02);
  const auto grads = testing::random_float(rng(), n, 0.0, 1e-2);
  const auto m0 = testing::random_float(rng(), n, 0.0, 1e-2);
  const auto v0 = testing::random_float(rng(), n, 1.0, 0.0);
  DeviceBuffer<float> d_master(master0), d_grads(grads), d_m(m0), d_v(v0),
      d_scale(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
  const std::vector<Bf16> weights0(n, from_float(9.0f));
  DeviceBuffer<Bf16> d_weights(weights0);
  adamw_update(d_master.get(), d_weights.get(), d_m.get(), d_v.get(), d_grads.get(), n, AdamWStep{},
               d_scale.get(), nullptr);
  EXPECT_EQ(d_master.download(), master0);
  EXPECT_EQ(d_m.download(), m0);
  EXPECT_EQ(d_v.download(), v0);
  const auto weights = d_weights.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(weights[i].bits, weights0[i].bits) << "element " << i;
}

TEST(AdamWArguments, RejectsStepZero) {
  AdamWStep step;
  step.step = 0;
  EXPECT_THROW(adamw_update(nullptr, nullptr, nullptr, nullptr, nullptr, 4, step, nullptr, nullptr),
               KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
