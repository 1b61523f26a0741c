// The router losses' statistics and values, and DeepSeek-V3's bias update,
// against double-precision references written from the papers' definitions
// (Switch eq. 4 with f_i the share of choices and P_i the mean probability;
// ST-MoE eq. 5; DeepSeek-V3 Sec. 2.1.2).
//
// Tolerances:
// - group counts: exact (fp32 holds integers below 2^24 exactly).
// - probability sums: rtol 1e-4. Each p is fp32 within ~3e-7; the kernel sums a
//   group's S <= 512 terms of one sign in 8 interleaved runs, then the chunks in
//   order: a relative error below (S / 8 + chunks) 2^-24 < 1e-5, with margin.
// - loss values: rtol 1e-5 (one fp32 sum of at most a few thousand products of one
//   sign, then one multiplication) plus atol 1e-7.
// - bias update: exact (each bias moves by +-u or not at all, the same fp32 addition
//   on both sides); the step's load: exact (int32 sums).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/moe_load_balancing.h"
#include "tests/kernels/gpu_test_support.h"
#include "tests/kernels/moe_router_reference.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  const char* name;
  int tokens, experts, topk;
  MoeScoreFunction score;
  int group_tokens;  // 0: all tokens
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // for the test list

MoeRouterOptions options(const Case& c) {
  MoeRouterOptions o;
  o.topk = c.topk;
  o.score_function = c.score;
  return o;
}

class MoeLoadBalancingTest : public testing::GpuTestWithParam<Case> {};

// The router forward on the device, then the statistics and the losses, against
// the reference computed from the same logits.
TEST_P(MoeLoadBalancingTest, StatisticsAndLossesMatchReference) {
  const Case c = GetParam();
  const int group_tokens = c.group_tokens == 0 ? c.tokens : c.group_tokens;
  const int groups = c.tokens / group_tokens;
  std::vector<float> logits = testing::random_float(rng(), static_cast<std::size_t>(c.tokens) * c.experts, 0.0, 2.0);
  if (c.score == MoeScoreFunction::kSigmoid)
    testing::separate_sigmoid_scores(logits, {}, c.tokens, c.experts, c.topk, 2.0, 2e-6, rng());
  const std::size_t slots = static_cast<std::size_t>(c.tokens) * c.topk;
  const std::size_t cells = static_cast<std::size_t>(groups) * c.experts;
  DeviceBuffer<float> d_logits(logits), d_weights(slots), d_lse(c.tokens), d_score_sum(c.tokens),
      d_prob_sums(cells), d_group_counts(cells), d_losses(2);
  DeviceBuffer<std::int32_t> d_ids(slots), d_counts(c.experts);
  const std::size_t workspace_bytes = moe_aux_loss_statistics_workspace_bytes(c.tokens, c.experts, c.group_tokens);
  DeviceBuffer<char> workspace(workspace_bytes);

  moe_router_forward(d_ids.get(), d_weights.get(), d_lse.get(), d_score_sum.get(), d_counts.get(), d_logits.get(),
                     nullptr, c.tokens, c.experts, options(c), nullptr);
  moe_aux_loss_statistics(d_prob_sums.get(), d_group_counts.get(), d_logits.get(), d_lse.get(), d_score_sum.get(),
                          d_ids.get(), c.tokens, c.experts, options(c), c.group_tokens, workspace.get(),
                          workspace_bytes, nullptr);
  MoeRouterLossOptions losses;
  losses.aux_loss_coeff = 0.01f;
  losses.aux_group_tokens = c.group_tokens;
  losses.z_loss_coeff = 0.001f;
  moe_router_loss_values(d_losses.get(), d_losses.get() + 1, d_prob_sums.get(), d_group_counts.get(), d_lse.get(),
                         c.tokens, c.experts, c.topk, losses, nullptr);

  const testing::RouterReference r = testing::router_reference(logits, {}, c.tokens, c.experts, options(c));
  const std::vector<double> p = testing::balancing_probabilities(logits, c.tokens, c.experts, c.score);
  const std::vector<double> counts = testing::group_counts(r.ids, c.tokens, c.experts, c.topk, group_tokens);
  std::vector<double> prob_sums(cells, 0.0);
  for (int t = 0; t < c.tokens; ++t)
    for (int i = 0; i < c.experts; ++i)
      prob_sums[static_cast<std::size_t>(t / group_tokens) * c.experts + i] += p[static_cast<std::size_t>(t) * c.experts + i];
  EXPECT_EQ(to_double(d_group_counts.download()), counts);
  EXPECT_TRUE(all_close(to_double(d_prob_sums.download()), prob_sums, 1e-4, 0.0)) << "probability sums";

  // Switch eq. 4 per group, averaged: alpha N sum_i f_i P_i, f_i = count_i / (k S), P_i = mean p.
  double aux = 0;
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < c.experts; ++i) {
      const std::size_t at = static_cast<std::size_t>(g) * c.experts + i;
      const double f = counts[at] / (static_cast<double>(c.topk) * group_tokens);
      const double P = prob_sums[at] / group_tokens;
      aux += losses.aux_loss_coeff * c.experts * f * P / groups;
    }
  // ST-MoE eq. 5: c_z (1/T) sum_t lse_t^2.
  double z = 0;
  for (double l : r.lse) z += losses.z_loss_coeff * l * l / c.tokens;
  EXPECT_TRUE(all_close(to_double(d_losses.download()), {aux, z}, 1e-5, 1e-7)) << "aux loss, z-loss";
}

// Megatron's global aux loss over one micro-batch (Mixtral-like); per-sequence
// groups of 128 over 4 sequences (Qwen3-like, 128 experts); a group of 512 tokens
// split into two chunks; the sigmoid router's probabilities (DeepSeek-V3); one token.
INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeLoadBalancingTest,
    ::testing::Values(Case{"MixtralGlobal", 300, 8, 2, MoeScoreFunction::kSoftmax, 0},
                      Case{"Qwen3PerSequence", 512, 128, 8, MoeScoreFunction::kSoftmax, 128},
                      Case{"TwoChunksPerGroup", 512, 16, 4, MoeScoreFunction::kSoftmax, 512},
                      Case{"DeepSeekV3Sigmoid", 96, 256, 8, MoeScoreFunction::kSigmoid, 32},
                      Case{"OneToken", 1, 4, 1, MoeScoreFunction::kSoftmax, 0}),
    case_name);

class MoeLoadBalancingEdgeTest : public testing::GpuTest {};

// A perfectly balanced uniform router: p_i = 1/N and f_i = 1/N, so the Switch loss
// is alpha N * N (1/N)(1/N) = alpha, whatever N and k (Fedus et al. 2021: the loss
// is minimised, at alpha, by uniform routing). 64 tokens, 8 experts, top-2: each
// expert chosen 16 times. Its z-loss: lse = 0.5 + ln 8 for logits all 0.5.
TEST_F(MoeLoadBalancingEdgeTest, UniformRouterLossIsAlpha) {
  const int tokens = 64, experts = 8, topk = 2;
  std::vector<std::int32_t> ids(tokens * topk);
  for (int s = 0; s < tokens * topk; ++s) ids[s] = s % experts;  // token t: experts 2t, 2t + 1 (mod 8)
  std::vector<float> logits(tokens * experts, 0.5f), lse(tokens, 0.5f + std::log(8.0f)), score_sum(tokens, 1.0f);
  DeviceBuffer<float> d_logits(logits), d_lse(lse), d_score_sum(score_sum), d_prob_sums(experts),
      d_group_counts(experts), d_losses(2);
  DeviceBuffer<std::int32_t> d_ids(ids);
  MoeRouterOptions o;
  o.topk = topk;
  const std::size_t workspace_bytes = moe_aux_loss_statistics_workspace_bytes(tokens, experts, 0);
  DeviceBuffer<char> workspace(workspace_bytes);
  moe_aux_loss_statistics(d_prob_sums.get(), d_group_counts.get(), d_logits.get(), d_lse.get(), d_score_sum.get(),
                          d_ids.get(), tokens, experts, o, 0, workspace.get(), workspace_bytes, nullptr);
  MoeRouterLossOptions losses;
  losses.aux_loss_coeff = 0.01f;
  losses.z_loss_coeff = 0.001f;
  moe_router_loss_values(d_losses.get(), d_losses.get() + 1, d_prob_sums.get(), d_group_counts.get(), d_lse.get(),
                         tokens, experts, topk, losses, nullptr);
  EXPECT_EQ(d_group_counts.download(), std::vector<float>(experts, 16.0f));
  const double lse_value = 0.5 + std::log(8.0);
  EXPECT_TRUE(all_close(to_double(d_losses.download()), {0.01, 0.001 * lse_value * lse_value}, 1e-5, 0.0));
}

// Loads 10, 30, 20, 20 (mean 20): the underloaded expert's bias rises by u, the
// overloaded one's falls by u, those at the mean keep theirs.
TEST_F(MoeLoadBalancingEdgeTest, BiasMovesTowardTheMeanLoad) {
  const float u = 1e-3f;
  const std::vector<float> bias = {0.5f, -0.25f, 0.125f, 0.0f};
  DeviceBuffer<float> d_bias(bias);
  DeviceBuffer<std::int32_t> d_counts(std::vector<std::int32_t>{10, 30, 20, 20});
  moe_expert_bias_update(d_bias.get(), d_counts.get(), 4, u, nullptr);
  EXPECT_EQ(d_bias.download(), (std::vector<float>{0.5f + u, -0.25f - u, 0.125f, 0.0f}));
}

// 1024 experts (the most the kernel takes), one block: loads 0..1023, mean 511.5:
// the lower half rises, the upper half falls; none is at the mean.
TEST_F(MoeLoadBalancingEdgeTest, BiasUpdateOverTheWidestRouter) {
  const int experts = kMoeMaxExperts;
  std::vector<std::int32_t> loads(experts);
  for (int i = 0; i < experts; ++i) loads[i] = i;
  DeviceBuffer<float> d_bias(std::vector<float>(experts, 0.0f));
  DeviceBuffer<std::int32_t> d_counts(loads);
  moe_expert_bias_update(d_bias.get(), d_counts.get(), experts, 0.5f, nullptr);
  const std::vector<float> got = d_bias.download();
  for (int i = 0; i < experts; ++i) ASSERT_EQ(got[i], i < experts / 2 ? 0.5f : -0.5f) << "expert " << i;
}

// A step of three micro-batches over 300 experts (two blocks of the kernel):
// the load is their sum, exact in int32, added to what the total held.
TEST_F(MoeLoadBalancingEdgeTest, StepLoadSumsTheMicroBatchesCounts) {
  const int experts = 300;
  std::vector<std::int32_t> want(experts), total(experts);
  for (int i = 0; i < experts; ++i) want[i] = total[i] = 1000 * i;
  DeviceBuffer<std::int32_t> d_total(total);
  for (int mb = 0; mb < 3; ++mb) {
    std::vector<std::int32_t> counts(experts);
    for (int i = 0; i < experts; ++i) {
      counts[i] = (i * 7 + mb * 13) % 50;
      want[i] += counts[i];
    }
    DeviceBuffer<std::int32_t> d_counts(counts);
    moe_accumulate_expert_load(d_total.get(), d_counts.get(), experts, nullptr);
  }
  EXPECT_EQ(d_total.download(), want);
}

TEST(MoeLoadBalancingArguments, NameWhatIsWrong) {
  MoeRouterLossOptions losses;
  losses.aux_group_tokens = 48;
  float scalar = 0;
  try {
    moe_router_loss_values(&scalar, nullptr, &scalar, &scalar, nullptr, 100, 8, 2, losses, nullptr);
    FAIL() << "groups of 48 tokens over 100 tokens were accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_router_loss_values: group_tokens (48) must divide tokens (100)");
  }
  EXPECT_THROW(moe_expert_bias_update(&scalar, nullptr, 4, 1e-3f, nullptr), KernelArgumentError);
  EXPECT_THROW(moe_expert_bias_update(&scalar, nullptr, 0, 1e-3f, nullptr), KernelArgumentError);
  std::int32_t count = 0;
  try {
    moe_accumulate_expert_load(&count, &count, 0, nullptr);
    FAIL() << "0 experts were accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_accumulate_expert_load: experts (0) must be in [1, 1024]");
  }
  EXPECT_THROW(moe_accumulate_expert_load(nullptr, &count, 4, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
