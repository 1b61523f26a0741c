// The run conditions in one step (sim/compute/stage_rates.h): a profile, the
// launch mode and the power cap give each pipeline stage's rates (the profile
// is taken by const reference: read, never edited).
#include "sim/compute/stage_rates.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"

namespace sextant::sim {
namespace {

// The fixture's overheads: graph_kernel_s 1.5 µs, kernel_launch_s 4 µs.
CostProfile engine_profile() {
  return load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
}

GpuConfig h100() { return PresetCatalog(SEXTANT_TEST_CONFIG_DIR).gpu("h100-sxm-80gb"); }

ParallelLayout pipeline_of(int pp) {
  ParallelLayout l;
  l.pp = pp;
  l.gbs = 8;
  return l;
}

TEST(RunConditions, FollowTheProfileAndTheLayout) {
  CostProfile profile = engine_profile();
  const ParallelLayout one = pipeline_of(1);
  const ParallelLayout four = pipeline_of(4);
  EXPECT_EQ(run_conditions(profile, ModelConfig{}, one).launch_mode, LaunchMode::kGraphReplay);
  EXPECT_EQ(run_conditions(profile, ModelConfig{}, four).launch_mode, LaunchMode::kKernelsLaunched);
  EXPECT_FALSE(run_conditions(profile, ModelConfig{}, four).power_capped());  // no fit, no cap

  profile.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), 0.42}}, 0, 0};
  const RunConditions capped = run_conditions(profile, ModelConfig{}, one);
  EXPECT_DOUBLE_EQ(capped.power_cap_hfu, 0.42);
  EXPECT_FALSE(capped.at_burst_clock().power_capped());
  EXPECT_EQ(capped.at_burst_clock().launch_mode, LaunchMode::kGraphReplay);
  // Timing tasks launches every kernel, even on one GPU; the cap stays.
  const RunConditions timed = task_timing_conditions(profile, ModelConfig{}, one);
  EXPECT_EQ(timed.launch_mode, LaunchMode::kKernelsLaunched);
  EXPECT_DOUBLE_EQ(timed.power_cap_hfu, 0.42);
}

TEST(StageRates, TheLaunchModeSetsTheGapAfterEachKernel) {
  const CostProfile profile = engine_profile();
  const ParallelLayout one = pipeline_of(1);
  RunConditions conditions;
  EXPECT_DOUBLE_EQ(stage_rates(h100(), profile, one, conditions).stage(0).measured_kernel_gap_s, 1.5e-6);
  conditions.launch_mode = LaunchMode::kKernelsLaunched;
  const StageRates launched = stage_rates(h100(), profile, one, conditions);
  EXPECT_DOUBLE_EQ(launched.stage(0).measured_kernel_gap_s, 4.0e-6);
  // No cap: every stage at the burst clock, the fit's factor (none here: 1).
  EXPECT_TRUE(launched.clock_slowdowns.empty());
  EXPECT_DOUBLE_EQ(launched.stage(0).compute_time_factor, 1.0);
}

// Four stages, the last holding the output layer: compute 1, 1, 1, 1.4 at the
// burst clock (mean 1.1), the step's HFU there 0.5, the cap 0.47, the fit's
// compute_time_factor 1.04, four GPUs (every kernel launched).
//   stages 0-2: activity 0.5·1/1.1 = 0.4545 < 0.47: the burst clock, factor 1.04;
//   stage 3:    activity 0.5·1.4/1.1 = 0.6364, slowdown (0.6364/0.47)^(1/3) = 1.35397^(1/3)
//               = 1.10629, factor 1.04·1.10629 = 1.15054.
// The launch gap (host latency) and the datasheet rates are the same on every stage.
TEST(StageRates, EachStageUnderThePowerCapAndTheLaunchMode) {
  CostProfile profile = engine_profile();
  profile.fit = ProfileFit{"", {{std::string(kFitComputeTimeFactor), 1.04}, {std::string(kFitPowerCapHfu), 0.47}}, 0, 0};
  const ParallelLayout four = pipeline_of(4);
  const RunConditions conditions = run_conditions(profile, ModelConfig{}, four);
  const StageRates rates = stage_rates(h100(), profile, four, conditions, {{1.0, 1.0, 1.0, 1.4}, 0.5});
  ASSERT_EQ(rates.clock_slowdowns.size(), 4u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_DOUBLE_EQ(rates.clock_slowdown(s), 1.0);
    EXPECT_DOUBLE_EQ(rates.stage(s).compute_time_factor, 1.04);
  }
  const double slowdown = std::cbrt(0.5 * 1.4 / 1.1 / 0.47);
  EXPECT_NEAR(slowdown, 1.10629, 1e-5);
  EXPECT_NEAR(rates.clock_slowdown(3), slowdown, 1e-12);
  EXPECT_NEAR(rates.stage(3).compute_time_factor, 1.04 * slowdown, 1e-12);  // 1.15054
  EXPECT_NEAR(rates.stage(3).compute_time_factor, 1.15054, 1e-5);
  for (int s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(rates.stage(s).measured_kernel_gap_s, 4.0e-6);
    EXPECT_DOUBLE_EQ(rates.stage(s).gemm_flops_per_s, rates.burst.gemm_flops_per_s);
  }
}

// One stage's share is the whole step: HFU 0.8 at the burst clock against a
// 0.4 cap slows it by 2^(1/3) = 1.25992, whatever its compute time.
TEST(StageRates, OneStageRunsAtTheUniformModelsClock) {
  CostProfile profile = engine_profile();
  profile.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), 0.4}}, 0, 0};
  const ParallelLayout one = pipeline_of(1);
  const StageRates rates = stage_rates(h100(), profile, one, run_conditions(profile, ModelConfig{}, one), {{123.0}, 0.8});
  EXPECT_NEAR(rates.stage(0).compute_time_factor, std::cbrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(rates.stage(0).measured_kernel_gap_s, 1.5e-6);  // one GPU: the graph replay's gap
}

TEST(StageRates, APowerCapNeedsEveryStagesBurstClockCompute) {
  CostProfile profile = engine_profile();
  profile.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), 0.4}}, 0, 0};
  const ParallelLayout four = pipeline_of(4);
  EXPECT_THROW(stage_rates(h100(), profile, four, run_conditions(profile, ModelConfig{}, four), {{1.0, 1.0}, 0.5}),
               std::invalid_argument);
  // Without a cap the load is not read.
  EXPECT_NO_THROW(stage_rates(h100(), profile, four, run_conditions(profile, ModelConfig{}, four).at_burst_clock()));
}

}  // namespace
}  // namespace sextant::sim
