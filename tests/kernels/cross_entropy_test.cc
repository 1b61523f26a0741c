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

// Logits of more than 2^31 elements (16,800 tokens x Llama 3's 128,256 entries:
// 2.15e9; the engine's shape check no longer bounds tokens x vocab): the rows
// past element 2^31 must be read and written at their 64-bit offsets. Only the
// first row and the last three carry random logits and targets (the rest are
// zero and ignored, so the 4.3 GB buffer needs no upload); the checked rows are
// compared with the reference, in place as the output layer runs it.
class CrossEntropyLargeTest : public testing::GpuTest {};

TEST_F(CrossEntropyLargeTest, RowsPastTwoToThe31stElementsMatchReference) {
  constexpr int kRows = 16800, kVocab = 128256;
  const std::size_t n = static_cast<std::size_t>(kRows) * kVocab;
  ASSERT_GT(n, std::size_t{1} << 31);
  std::size_t free_bytes = 0, total_bytes = 0;
  SEXTANT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < n * sizeof(Bf16) + (std::size_t{1} << 30))
    GTEST_SKIP() << "needs " << n * sizeof(Bf16) / (1 << 20) << " MiB of GPU memory";
  const std::vector<int> checked = {0, kRows - 3, kRows - 2, kRows - 1};
  ASSERT_GT(static_cast<std::size_t>(checked[1]) * kVocab, std::size_t{1} << 31);
  DeviceBuffer<Bf16> d_logits(n);
  SEXTANT_CUDA_CHECK(cudaMemset(d_logits.get(), 0, n * sizeof(Bf16)));
  std::vector<std::int32_t> targets(kRows, -1);
  std::vector<std::vector<Bf16>> rows;
  for (int i = 0; i < static_cast<int>(checked.size()); ++i) {
    rows.push_back(testing::random_bf16(rng(), kVocab, 0.0, 3.0));
    targets[checked[i]] = i == 1 ? kVocab - 1 : static_cast<std::int32_t>(rng()() % kVocab);
    SEXTANT_CUDA_CHECK(cudaMemcpy(d_logits.get() + static_cast<std::size_t>(checked[i]) * kVocab,
                                  rows.back().data(), kVocab * sizeof(Bf16), cudaMemcpyHostToDevice));
  }
  DeviceBuffer<std::int32_t> d_targets(targets);
  DeviceBuffer<float> d_losses(kRows);
  const float grad_scale = 1.0f / 4096.0f;
  softmax_cross_entropy(d_losses.get(), d_logits.get(), d_logits.get(), d_targets.get(), kRows, kVocab,
                        grad_scale, nullptr);
  const std::vector<float> losses = d_losses.download();
  for (int i = 0; i < static_cast<int>(checked.size()); ++i) {
    const int row = checked[i];
    const Reference want = reference(to_double(rows[i]), {targets[row]}, 1, kVocab, grad_scale);
    std::vector<Bf16> got(kVocab);
    SEXTANT_CUDA_CHECK(cudaMemcpy(got.data(), d_logits.get() + static_cast<std::size_t>(row) * kVocab,
                                  kVocab * sizeof(Bf16), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(all_close({static_cast<double>(losses[row])}, want.losses, 1e-5, 1e-5)) << "loss of row " << row;
    EXPECT_TRUE(all_close(to_double(got), want.dlogits, 1e-2, 1e-6 * grad_scale)) << "dlogits of row " << row;
  }
  EXPECT_EQ(losses[1], 0.0f) << "an ignored row's loss";
}

}  // namespace
}  // namespace sextant::kernels
