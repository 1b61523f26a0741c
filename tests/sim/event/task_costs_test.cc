#include "sim/event/task_costs.h"

#include <gtest/gtest.h>

#include "sim/comm/parallel_comm.h"
#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "sim/core/config_loader.h"
#include "sim/memory/parameter_count.h"
#include "sim/plan/plan_builder.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

PlanOptions with_schedule(PipelineSchedule schedule) {
  PlanOptions options;
  options.schedule = schedule;
  return options;
}

struct LayerTotals {
  double forward = 0, backward = 0, weight = 0, tp_forward = 0, tp_backward = 0;
};

// Sums one layer's task durations for micro-batch 0 by pass.
LayerTotals layer_totals(const Plan& plan, const std::vector<TaskCost>& costs, int layer) {
  LayerTotals out;
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    if (t.layer != layer || t.microbatch != 0) continue;
    const double d = costs[i].duration_s;
    const bool tp = t.kind == TaskKind::kTensorParallel || t.kind == TaskKind::kTensorParallelTail ||
                    t.kind == TaskKind::kTensorParallelGather || t.kind == TaskKind::kTensorParallelScatter;
    if (t.kind == TaskKind::kCompute) {
      if (t.pass == Pass::kForward) out.forward += d;
      if (t.pass == Pass::kBackward || t.pass == Pass::kBackwardInput) out.backward += d;
      if (t.pass == Pass::kBackwardWeight) out.weight += d;
    } else if (tp) {
      (t.pass == Pass::kForward ? out.tp_forward : out.tp_backward) += d;
    }
  }
  return out;
}

// One cost model, two engines: a layer's attention and MLP tasks add up to
// layer_time's forward and backward, its TP tasks to layer_comm's.
TEST(TaskCosts, SplitTheAnalyticalLayerTimeIntoBlocks) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  const CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = 8;
  l.gbs = 8;
  l.recompute = Recompute::kNone;
  const DeviceRates rates = device_rates(cluster.gpu, profile, l.precision);
  const PassTime t = layer_time(m, l, rates, false);
  const LayerComm c = layer_comm(m, l, cluster, link_rates(cluster, profile), false);

  for (const PipelineSchedule schedule : {PipelineSchedule::kOneFOneB, PipelineSchedule::kZeroBubbleH1}) {
    const Plan plan = build_plan(m, l, with_schedule(schedule));
    const std::vector<TaskCost> costs = task_costs(plan, m, cluster, profile, l, stage_rates(cluster.gpu, profile, l, {}));
    const LayerTotals sum = layer_totals(plan, costs, 20);  // on stage 1
    EXPECT_NEAR(sum.forward, t.forward_s, 1e-15);
    EXPECT_NEAR(sum.backward + sum.weight, t.backward_s, 1e-15);
    EXPECT_NEAR(sum.tp_forward, c.tp_forward_s, 1e-15);
    EXPECT_NEAR(sum.tp_backward, c.tp_backward_s, 1e-15);
    if (schedule == PipelineSchedule::kZeroBubbleH1) {
      // W is the weight-gradient GEMMs: of the 3 GEMMs per linear layer, the
      // one with the fp32 accumulator (about a third of the backward's GEMMs).
      EXPECT_NEAR(sum.weight, t.weight_gradient_s, 1e-15);
      EXPECT_GT(sum.weight, 0.3 * t.gemm_backward_s);
      EXPECT_LT(sum.weight, 0.6 * t.gemm_backward_s);
    }
  }
}

// With --tp-comm-overlap a block's collectives are split: (tp−1)/tp beside the
// block, 1/tp after it.
TEST(TaskCosts, OverlappedTensorParallelLeavesOneChunk) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  const CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.tp_comm_overlap = true;
  l.gbs = 1;
  const LayerComm c = layer_comm(m, l, cluster, link_rates(cluster, profile), false);
  const Plan plan = build_plan(m, l);
  const std::vector<TaskCost> costs = task_costs(plan, m, cluster, profile, l, stage_rates(cluster.gpu, profile, l, {}));
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    if (t.layer != 0 || t.pass != Pass::kForward || t.block != Block::kAttention) continue;
    if (t.kind == TaskKind::kTensorParallel) {
      EXPECT_DOUBLE_EQ(costs[i].duration_s, c.tp_forward_s / 2 * 7 / 8);
      EXPECT_EQ(costs[i].link, LinkKind::kNvlink);
    }
    if (t.kind == TaskKind::kTensorParallelTail) {
      EXPECT_DOUBLE_EQ(costs[i].duration_s, c.tp_forward_s / 2 / 8);
    }
  }
}

// Each stage's tasks at its own rates (stage_rates.h): a stage slowed by 1.25
// (a power cap) runs its layers and its optimizer step at stage(1)'s rates,
// the other at the burst clock's; the sends between them at the links' rates.
TEST(TaskCosts, EachStageAtItsOwnRates) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  // A measured profile: its kernel times are multiplied by compute_time_factor.
  const CostProfile profile =
      load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
  ParallelLayout l;
  l.tp = 8;
  l.pp = 2;
  l.gbs = 4;
  l.recompute = Recompute::kNone;
  StageRates rates = stage_rates(cluster.gpu, profile, l, {});
  rates.clock_slowdowns = {1.0, 1.25};
  const Plan plan = build_plan(m, l);
  const std::vector<TaskCost> costs = task_costs(plan, m, cluster, profile, l, rates);
  const double local_params = optimizer_params_per_gpu(largest_stage_params_per_gpu(m, l, plan.shape.split), l);
  for (int s = 0; s < 2; ++s) {
    const PassTime t = layer_time(m, l, rates.stage(s), false);
    const LayerTotals sum = layer_totals(plan, costs, s == 0 ? 0 : 48);  // the first layer of each stage
    EXPECT_NEAR(sum.forward, t.forward_s, 1e-15) << "stage " << s;
    EXPECT_NEAR(sum.backward + sum.weight, t.backward_s, 1e-15) << "stage " << s;
    for (std::uint32_t i = plan.stage_begin[static_cast<std::size_t>(s)]; i < plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++i)
      if (plan.tasks[i].kind == TaskKind::kOptimizerStep)
        EXPECT_DOUBLE_EQ(costs[i].duration_s, optimizer_step_time_s(local_params, rates.stage(s))) << "stage " << s;
  }
  EXPECT_GT(layer_totals(plan, costs, 48).forward, 1.2 * layer_totals(plan, costs, 0).forward);
}

// The PassTime parts: attention plus MLP are the totals, which are unchanged.
TEST(LayerTimeParts, AttentionAndWeightGradientsArePartsOfTheTotals) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  CostProfile profile = testing::ideal_profile(cluster.gpu.name);
  ParallelLayout l;
  l.tp = 8;
  l.cp = 2;
  for (const Precision precision : {Precision::kBf16, Precision::kFp8}) {
    l.precision = precision;
    ClusterConfig c = cluster;
    c.gpu.peak_fp8_flops_per_s = 624e12;
    const PassTime t = layer_time(m, l, device_rates(c.gpu, profile, precision), false);
    EXPECT_GT(t.attention_forward_s, t.attention_core_forward_s);
    EXPECT_LT(t.attention_forward_s, t.forward_s);
    EXPECT_GT(t.attention_backward_s, t.attention_core_backward_s);
    EXPECT_LT(t.attention_backward_s, t.backward_s);
    EXPECT_LT(t.weight_gradient_s, t.gemm_backward_s);
    EXPECT_LT(t.attention_weight_gradient_s, t.weight_gradient_s);
  }
}

}  // namespace
}  // namespace sextant::sim
