// The power-capped clock (sim/compute/power_cap.h): the slowdown's cube law,
// and both engines costing a layout at the same sustained clock.
#include "sim/compute/power_cap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/analytic/analytic_model.h"
#include "sim/compute/stage_rates.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "sim/event/event_simulation.h"

namespace sextant::sim {
namespace {

TEST(PowerCap, SlowdownIsTheCubeRootOfTheActivityOverTheCap) {
  EXPECT_DOUBLE_EQ(power_cap_slowdown(0.3, 0.4), 1.0);   // below the cap: the burst clock
  EXPECT_DOUBLE_EQ(power_cap_slowdown(0.4, 0.4), 1.0);
  EXPECT_NEAR(power_cap_slowdown(0.8, 0.4), std::cbrt(2.0), 1e-12);   // 1.2599
  EXPECT_NEAR(power_cap_slowdown(0.54, 0.4), std::cbrt(1.35), 1e-12);  // 1.1052
  EXPECT_DOUBLE_EQ(power_cap_slowdown(0.9, 0.0), 1.0);   // no cap
}

// `profile` with every kernel `factor` times as long: every stage at one
// sustained clock, for comparison.
CostProfile at_one_clock(const CostProfile& profile, double factor) {
  CostProfile slowed = profile;
  slowed.fit = ProfileFit{"", {{std::string(kFitComputeTimeFactor), factor}}, 0, 0};
  return slowed;
}

struct Fixture {
  PresetCatalog catalog{SEXTANT_TEST_CONFIG_DIR};
  ClusterConfig cluster = catalog.cluster("dgx-h100");
  CostProfile burst = load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
  ModelConfig model = catalog.model("gpt-1.3b");
  ParallelLayout layout;
  Fixture() {
    model.hidden_dropout = model.attention_dropout = 0;
    layout.mbs = 4;
    layout.gbs = 8;
    layout.sp = false;
  }
};

TEST(PowerCap, ResolvedStageRatesScaleEveryKernelByTheSlowdownOfTheBurstHfu) {
  Fixture f;
  const SimulationResult at_burst = simulate_analytic(f.model, f.cluster, f.burst, f.layout);
  CostProfile capped = f.burst;
  const double cap = 0.5 * at_burst.hfu;  // binds: slowdown 2^(1/3)
  capped.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), cap}}, 0, 0};
  const RunConditions conditions = run_conditions(capped, f.model, f.layout);
  ASSERT_TRUE(conditions.power_capped());
  const StageRates resolved = stage_rates(f.cluster.gpu, capped, f.layout, conditions, {{1.0}, at_burst.hfu});
  EXPECT_DOUBLE_EQ(resolved.burst.compute_time_factor, 1.0);  // the cap applied once, to the stage's rates
  EXPECT_NEAR(resolved.stage(0).compute_time_factor, std::cbrt(2.0), 1e-12);
  // One GPU: the step is kernels plus host time, the kernels' part scaled by 2^(1/3).
  const SimulationResult sustained = simulate_analytic(f.model, f.cluster, capped, f.layout);
  EXPECT_GT(sustained.step_time_s, 1.2 * at_burst.step_time_s);
  EXPECT_LT(sustained.step_time_s, std::cbrt(2.0) * at_burst.step_time_s + 1e-12);
  // A cap above the burst HFU changes nothing.
  capped.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), 2.0 * at_burst.hfu}}, 0, 0};
  EXPECT_DOUBLE_EQ(simulate_analytic(f.model, f.cluster, capped, f.layout).step_time_s, at_burst.step_time_s);
}

TEST(PowerCap, BothEnginesUseTheSameSustainedClock) {
  Fixture f;
  CostProfile capped = f.burst;
  capped.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), 0.3}}, 0, 0};
  const double analytic = simulate_analytic(f.model, f.cluster, capped, f.layout).step_time_s;
  const double event = simulate_event(f.model, f.cluster, capped, f.layout, EventOptions{}).result.step_time_s;
  const double burst_event = simulate_event(f.model, f.cluster, f.burst, f.layout, EventOptions{}).result.step_time_s;
  EXPECT_NEAR(event / analytic, 1.0, 0.02);  // one GPU: the engines agree to 2 % without a cap too
  EXPECT_GT(event, 1.05 * burst_event);
}

// Per pipeline stage: a stage's activity is the step's HFU times its compute
// over the mean stage's.
TEST(PowerCap, EachStageAtTheClockOfItsOwnActivity) {
  const std::vector<double> compute_s = {1.0, 1.0, 1.0, 1.4};  // the last stage holds the output layer
  // Mean 1.1: activities 0.5·(1/1.1) = 0.4545 (below a 0.47 cap) and 0.5·(1.4/1.1) = 0.6364.
  const std::vector<double> k = stage_power_cap_slowdowns(compute_s, 0.5, 0.47);
  EXPECT_DOUBLE_EQ(k[0], 1.0);
  EXPECT_DOUBLE_EQ(k[2], 1.0);
  EXPECT_NEAR(k[3], std::cbrt(0.5 * 1.4 / 1.1 / 0.47), 1e-12);  // 1.1063
  EXPECT_EQ(stage_power_cap_slowdowns(compute_s, 0.5, 0.0), std::vector<double>(4, 1.0));
  // Equal stages: the uniform model's slowdown for every one.
  for (const double each : stage_power_cap_slowdowns(std::vector<double>(4, 2.0), 0.6, 0.4))
    EXPECT_NEAR(each, std::cbrt(1.5), 1e-12);
}

// A pipeline's last stage (the output layer, no warm-up bubble) runs at a
// lower clock than the first, and paces the step: slower than with every
// stage at the uniform model's clock.
TEST(PowerCap, APipelinesStagesRunAtTheirOwnClocks) {
  Fixture f;
  f.layout.pp = 4;
  f.layout.mbs = 2;
  f.layout.gbs = 32;
  const SimulationResult at_burst = simulate_analytic(f.model, f.cluster, f.burst, f.layout);
  CostProfile capped = f.burst;
  capped.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), 0.8 * at_burst.hfu}}, 0, 0};
  const EventSimulation e = simulate_event(f.model, f.cluster, capped, f.layout, EventOptions{});
  const double burst_s = simulate_event(f.model, f.cluster, f.burst, f.layout, EventOptions{}).result.step_time_s;
  const double uniform_s =
      simulate_event(f.model, f.cluster, at_one_clock(f.burst, std::cbrt(1.25)), f.layout, EventOptions{})
          .result.step_time_s;
  // The last stage's compute share is above the mean, so it is slowed by more
  // than the uniform cube root of 1.25; the step follows it.
  EXPECT_GT(e.result.step_time_s, uniform_s);
  EXPECT_GT(e.result.step_time_s, burst_s);
  const auto compute = [&](int s) { return e.timeline.stages[static_cast<std::size_t>(s)].busy_s[0]; };
  EXPECT_GT(compute(3), compute(0));
  // The analytic model resolves the cap per stage as well: the engines agree as at one clock.
  const double analytic_s = simulate_analytic(f.model, f.cluster, capped, f.layout).step_time_s;
  EXPECT_NEAR(analytic_s / e.result.step_time_s, 1.0, 0.02);
  EXPECT_GT(analytic_s, simulate_analytic(f.model, f.cluster, at_one_clock(f.burst, std::cbrt(1.25)),
                                          f.layout).step_time_s);
}

}  // namespace
}  // namespace sextant::sim
