#include "sim/analytic/analytic_model.h"

#include <gtest/gtest.h>

#include "sim/flops/model_flops.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

// Uniform stages: a tiny vocabulary so the embedding and output layers weigh
// nothing, an ideal profile. The bubble must be (p−1)/(v·m) of the compute
// (Narayanan et al. 2021, Sec. 2.2).
class PipelineBubble : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(PipelineBubble, MatchesNarayananFraction) {
  const auto [pp, vpp, microbatches] = GetParam();
  ModelConfig m = testing::gpt3_175b();
  m.vocab_size = 1;
  m.position_embedding = PositionEmbedding::kRope;  // no learned positions either
  const ClusterConfig cluster = testing::dgx_a100();
  const CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = pp;
  l.vpp = vpp;
  l.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = microbatches;
  const SimulationResult r = simulate_analytic(m, cluster, profile, l);
  const double stage_time = r.time.compute_s / microbatches + r.exposed_tp_s / microbatches;
  const double expected = (pp - 1.0) / vpp * stage_time;
  // The embedding lookup (first stage) and final norm (last) are memory-bound
  // kernels the middle stages do not run: with 96/pp layers per stage they make
  // the stages unequal by under 1 %.
  EXPECT_NEAR(r.time.pipeline_bubble_s / expected, 1.0, 0.01);
  EXPECT_NEAR(r.time.pipeline_bubble_s / r.time.compute_s,
              (pp - 1.0) / (vpp * microbatches) * (1 + r.exposed_tp_s / r.time.compute_s), 0.01);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineBubble,
                         ::testing::Values(std::make_tuple(8, 1, 64), std::make_tuple(8, 3, 96),
                                           std::make_tuple(16, 2, 32), std::make_tuple(4, 6, 8)));

TEST(AnalyticModel, MfuIsModelFlopsOverPeakTime) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  const CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = 16;
  l.dp = 12;
  l.mbs = 1;
  l.gbs = 1536;
  l.zero = 1;
  l.recompute = Recompute::kSelective;
  const SimulationResult r = simulate_analytic(m, cluster, profile, l);
  const StepFlops flops = step_flops(m, l);
  EXPECT_DOUBLE_EQ(r.model_flops_per_step, flops.model_flops);
  EXPECT_DOUBLE_EQ(r.mfu, flops.model_flops / (r.step_time_s * 1536 * 312e12));
  EXPECT_DOUBLE_EQ(r.step_time_s, r.time.compute_s + r.time.exposed_communication_s +
                                      r.time.pipeline_bubble_s + r.time.optimizer_s);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 1536.0 * 2048 / r.step_time_s);
  // An ideal GPU cannot beat its peak: the hardware FLOPs bound the step time.
  EXPECT_GT(r.step_time_s, flops.hardware_flops / (1536 * 312e12));
  EXPECT_LT(r.hfu, 1.0);
  EXPECT_TRUE(r.fits_memory);
}

TEST(AnalyticModel, OverlappingGradientReductionNeverSlowsTheStep) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  const CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.pp = 8;
  l.dp = 16;
  l.mbs = 1;
  l.gbs = 128;
  l.zero = 1;
  l.overlap_grad_reduce = false;
  l.overlap_param_gather = false;
  const SimulationResult plain = simulate_analytic(m, cluster, profile, l);
  l.overlap_grad_reduce = true;
  l.overlap_param_gather = true;
  const SimulationResult overlapped = simulate_analytic(m, cluster, profile, l);
  EXPECT_LT(overlapped.exposed_dp_s, plain.exposed_dp_s);
  EXPECT_GT(plain.exposed_dp_s, 0.0);
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// Qi et al. 2023: ZB-H1 shrinks the 1F1B bubble from (p−1)(F + B + W) to
// (p−1)(F + B − W); with W a third of a stage's time, to a third.
TEST(AnalyticModel, ZeroBubbleH1ShrinksTheBubble) {
  ModelConfig m = testing::gpt3_175b();
  m.vocab_size = 1;
  const ClusterConfig cluster = testing::dgx_a100();
  const CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = 8;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = 64;
  const SimulationResult one_f_one_b = simulate_analytic(m, cluster, profile, l);
  l.schedule = Schedule::kZeroBubbleH1;
  const SimulationResult zero_bubble = simulate_analytic(m, cluster, profile, l);
  EXPECT_DOUBLE_EQ(zero_bubble.time.compute_s, one_f_one_b.time.compute_s);
  const double ratio = zero_bubble.time.pipeline_bubble_s / one_f_one_b.time.pipeline_bubble_s;
  // W is the weight-gradient GEMMs: about half the backward, a third of F + B + W.
  EXPECT_GT(ratio, 0.2);
  EXPECT_LT(ratio, 0.45);
  EXPECT_DOUBLE_EQ(zero_bubble.memory.total(), one_f_one_b.memory.total());
}

}  // namespace
}  // namespace sextant::sim
