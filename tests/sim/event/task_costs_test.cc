#include "sim/event/task_costs.h"

#include <gtest/gtest.h>

#include "sim/comm/parallel_comm.h"
#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
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
    const std::vector<TaskCost> costs = task_costs(plan, m, cluster, profile, l, 0.0);
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
  const std::vector<TaskCost> costs = task_costs(plan, m, cluster, profile, l, 0.0);
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
