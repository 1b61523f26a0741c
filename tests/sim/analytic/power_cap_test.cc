// The power-capped clock (sim/analytic/power_cap.h): the slowdown's cube law,
// and both engines costing a layout at the same sustained clock.
#include "sim/analytic/power_cap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/analytic/analytic_model.h"
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

TEST(PowerCap, ResolvedProfileScalesEveryKernelByTheSlowdownOfTheBurstHfu) {
  Fixture f;
  const SimulationResult at_burst = simulate_analytic(f.model, f.cluster, f.burst, f.layout);
  CostProfile capped = f.burst;
  const double cap = 0.5 * at_burst.hfu;  // binds: slowdown 2^(1/3)
  capped.fit = ProfileFit{"", {{std::string(kFitPowerCapHfu), cap}}, 0, 0};
  ASSERT_TRUE(has_power_cap(capped));
  const CostProfile resolved = with_power_cap_resolved(f.model, f.cluster, capped, f.layout);
  EXPECT_FALSE(has_power_cap(resolved));
  EXPECT_NEAR(resolved.fit->parameter(kFitComputeTimeFactor, 0), std::cbrt(2.0), 1e-12);
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

}  // namespace
}  // namespace sextant::sim
