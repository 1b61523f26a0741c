// Fused softmax cross-entropy against a double-precision CPU reference.
// Tolerances:
// - loss (fp32): 1e-5 relative plus 1e-5 absolute. The kernel's log-sum-exp
//   sums positive terms (relative error ~1e-6 with expf), takes logf, and adds
//   max - logit[target], which is exact for bf16 inputs.
// - dlogits (bf16): rtol 1e-2 (one bf16 rounding, <= 2^-9, of an fp32 value
//   with ~1e-6 relative error) plus atol 1e-6 * grad_scale for probabilities
//   so small that relative error means nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cross_entropy.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Shape {
  int rows;
  int vocab;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  return "rows" + std::to_string(info.param.rows) + "_vocab" + std::to_string(info.param.vocab);
}

struct Reference {
  std::vector<double> losses, dlogits;
};

Reference reference(const std::vector<double>& logits, const std::vector<std::int32_t>& targets,
                    int rows, int vocab, double grad_scale) {
  Reference r{std::vector<double>(rows, 0.0), std::vector<double>(logits.size(), 0.0)};
  for (int i = 0; i < rows; ++i) {
    if (targets[i] < 0) continue;
    const double* x = &logits[static_cast<std::size_t>(i) * vocab];
    const double m = *std::max_element(x, x + vocab);
    double sum = 0;
    for (int c = 0; c < vocab; ++c) sum += std::exp(x[c] - m);
    r.losses[i] = std::log(sum) + m - x[targets[i]];
    for (int c = 0; c < vocab; ++c)
      r.dlogits[static_cast<std::size_t>(i) * vocab + c] =
          (std::exp(x[c] - m) / sum - (c == targets[i] ? 1.0 : 0.0)) * grad_scale;
  }
  return r;
}

class CrossEntropyTest : public testing::GpuTestWithParam<Shape> {
 protected:
  // Targets uniform over the vocabulary; about one row in eight ignored (-1).
  std::vector<std::int32_t> random_targets(int rows, int vocab) {
    std::uniform_int_distribution<int> any(0, vocab - 1);
    std::bernoulli_distribution ignored(0.125);
    std::vector<std::int32_t> t(rows);
    for (auto& v : t) v = ignored(rng()) ? -1 : any(rng());
    if (rows > 1) t[0] = 0, t[1] = vocab - 1;  // the first and last column
    return t;
  }
};

TEST_P(CrossEntropyTest, LossAndGradientMatchReference) {
  const auto [rows, vocab] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * vocab;
  const auto logits = testing::random_bf16(rng(), n, 0.0, 3.0);
  const auto targets = random_targets(rows, vocab);
  const float grad_scale = 1.0f / static_cast<float>(rows);
  DeviceBuffer<Bf16> d_logits(logits), d_dlogits(n);
  DeviceBuffer<std::int32_t> d_targets(targets);
  DeviceBuffer<float> d_losses(rows);

  softmax_cross_entropy(d_losses.get(), d_dlogits.get(), d_logits.get(), d_targets.get(), rows,
                        vocab, grad_scale, nullptr);

  const Reference want = reference(to_double(logits), targets, rows, vocab, grad_scale);
  EXPECT_TRUE(all_close(to_double(d_losses.download()), want.losses, 1e-5, 1e-5)) << "losses";
  EXPECT_TRUE(all_close(to_double(d_dlogits.download()), want.dlogits, 1e-2, 1e-6 * grad_scale))
      << "dlogits";
}

TEST_P(CrossEntropyTest, InPlaceAndLossOnlyAgreeWithSeparateBuffers) {
  const auto [rows, vocab] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * vocab;
  const auto logits = testing::random_bf16(rng(), n, 0.0, 3.0);
  const auto targets = random_targets(rows, vocab);
  DeviceBuffer<Bf16> d_logits(logits), d_dlogits(n);
  DeviceBuffer<std::int32_t> d_targets(targets);
  DeviceBuffer<float> d_losses(rows), d_losses_only(rows);

  softmax_cross_entropy(d_losses.get(), d_dlogits.get(), d_logits.get(), d_targets.get(), rows,
                        vocab, 1.0f, nullptr);
  softmax_cross_entropy(d_losses_only.get(), nullptr, d_logits.get(), d_targets.get(), rows,
                        vocab, 1.0f, nullptr);
  EXPECT_EQ(d_losses_only.download(), d_losses.download());
  EXPECT_EQ(d_logits.download().front().bits, logits.front().bits) << "loss-only wrote the logits";

  softmax_cross_entropy(d_losses_only.get(), d_logits.get(), d_logits.get(), d_targets.get(), rows,
                        vocab, 1.0f, nullptr);
  EXPECT_EQ(d_losses_only.download(), d_losses.download()) << "in place";
  const auto separate = d_dlogits.download(), in_place = d_logits.download();
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(in_place[i].bits, separate[i].bits) << "element " << i;
}

// vocab 8: one vector per row; 50304: GPT-2's vocabulary padded to a multiple
// of 128 (Megatron); 128256: Llama 3.
INSTANTIATE_TEST_SUITE_P(Shapes, CrossEntropyTest,
                         ::testing::Values(Shape{1, 8}, Shape{9, 1000}, Shape{33, 50304},
                                           Shape{4, 128256}),
                         shape_name);

}  // namespace
}  // namespace sextant::kernels
