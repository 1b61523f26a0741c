// Our engine's launch mode (sim/compute/launch_mode.h): one GPU replays a CUDA
// graph, several ranks launch every kernel; the simulators cost it so.
#include "sim/compute/launch_mode.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/analytic/analytic_model.h"
#include "sim/compute/device_rates.h"
#include "sim/compute/stage_rates.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "sim/event/event_simulation.h"

namespace sextant::sim {
namespace {

CostProfile engine_profile() {
  return load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
}

TEST(LaunchMode, SeveralRanksLaunchEveryKernel) {
  const CostProfile engine = engine_profile();
  ParallelLayout one;
  ParallelLayout four = one;
  four.dp = 4;
  EXPECT_EQ(engine_launch_mode(engine, ModelConfig{}, one), LaunchMode::kGraphReplay);
  EXPECT_EQ(engine_launch_mode(engine, ModelConfig{}, four), LaunchMode::kKernelsLaunched);
  // The gap after each kernel: the graph's 1.5 µs, a stream launch's 4 µs (the fixture's).
  EXPECT_DOUBLE_EQ(device_rates(GpuConfig{}, engine, Precision::kBf16).measured_kernel_gap_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(
      device_rates(GpuConfig{}, engine, Precision::kBf16, LaunchMode::kKernelsLaunched).measured_kernel_gap_s,
      4.0e-6);
  // An MoE model's layers wait on the host for their experts' rows: no graph, even on one GPU.
  ModelConfig moe;
  moe.num_layers = 2;
  moe.moe = MoeConfig{};
  moe.moe->num_experts = 8;
  EXPECT_EQ(engine_launch_mode(engine, moe, one), LaunchMode::kKernelsLaunched);
  // Other software's profiles say nothing of our engine's launches.
  CostProfile published = engine;
  published.software = Software::kMegatronPublished;
  EXPECT_EQ(engine_launch_mode(published, ModelConfig{}, four), LaunchMode::kGraphReplay);
}

// Both simulators cost a layout of several ranks as launched, whatever the
// caller passes; one GPU as a graph replay unless told otherwise.
TEST(LaunchMode, BothSimulatorsCostSeveralRanksLaunched) {
  const PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  ModelConfig m = catalog.model("gpt-350m");
  m.hidden_dropout = m.attention_dropout = 0;
  const ClusterConfig cluster = catalog.cluster("dgx-h100");
  const CostProfile engine = engine_profile();
  ParallelLayout one;
  one.mbs = 4;
  one.gbs = 4;
  ParallelLayout two = one;
  two.dp = 2;
  two.gbs = 8;
  const RunConditions launched = task_timing_conditions(engine, m, one);  // every kernel launched
  EventOptions timed;
  timed.conditions = launched;
  // One GPU: launching costs 2.5 µs more a kernel (about 500 kernels a step).
  const double graph_s = simulate_analytic(m, cluster, engine, one).step_time_s;
  EXPECT_GT(simulate_analytic(m, cluster, engine, one, launched).step_time_s, graph_s + 400 * 2.5e-6);
  EXPECT_GT(simulate_event(m, cluster, engine, one, timed).result.step_time_s,
            simulate_event(m, cluster, engine, one, EventOptions{}).result.step_time_s + 400 * 2.5e-6);
  // Two ranks: launched either way.
  EXPECT_DOUBLE_EQ(simulate_analytic(m, cluster, engine, two).step_time_s,
                   simulate_analytic(m, cluster, engine, two, launched).step_time_s);
  EXPECT_DOUBLE_EQ(simulate_event(m, cluster, engine, two, EventOptions{}).result.step_time_s,
                   simulate_event(m, cluster, engine, two, timed).result.step_time_s);
}

}  // namespace
}  // namespace sextant::sim
