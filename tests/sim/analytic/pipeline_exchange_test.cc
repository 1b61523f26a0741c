// DeepSpeed's sequential pipeline exchange (PipelineExchange::kSequential)
// against Megatron's batched one, in both engines.
#include <gtest/gtest.h>

#include "sim/analytic/analytic_model.h"
#include "sim/comm/parallel_comm.h"
#include "sim/event/event_simulation.h"
#include "sim/plan/plan_builder.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

struct PipelineExchangeTest : ::testing::Test {
  ModelConfig model = testing::gpt3_175b();
  ClusterConfig cluster = testing::dgx_a100();
  CostProfile batched = testing::ideal_profile("a100-sxm-80gb");
  CostProfile sequential = [this] {
    CostProfile p = batched;
    p.behaviour.pipeline_exchange = PipelineExchange::kSequential;
    return p;
  }();
  // tp 8 within a node, pp 8 across nodes, m = 64 micro-batches of one sequence.
  ParallelLayout layout = [] {
    ParallelLayout l;
    l.tp = 8;
    l.pp = 8;
    l.dp = 1;
    l.mbs = 1;
    l.gbs = 64;
    l.schedule = Schedule::kOneFOneB;
    l.recompute = Recompute::kFull;
    return l;
  }();
  double p2p_s() const {
    return pipeline_p2p_time_s(model, layout, cluster, link_rates(cluster, batched));
  }
};

// Batched: 2(m + p − 1) = 142 transfers on the critical path; sequential, four
// per micro-batch and 2(p − 1) for fill and drain: 4·64 + 14 = 270. Nothing
// else changes.
TEST_F(PipelineExchangeTest, AnalyticCountsFourTransfersPerMicrobatch) {
  const SimulationResult b = simulate_analytic(model, cluster, batched, layout);
  const SimulationResult s = simulate_analytic(model, cluster, sequential, layout);
  ASSERT_GT(p2p_s(), 0.0);
  EXPECT_NEAR(b.exposed_pp_s, 142 * p2p_s(), 1e-12);
  EXPECT_NEAR(s.exposed_pp_s, 270 * p2p_s(), 1e-12);
  EXPECT_NEAR(s.step_time_s - b.step_time_s, 128 * p2p_s(), 1e-9);
}

// The interleaved schedule overlaps its sends (--overlap-p2p-communication):
// the exchange behaviour does not apply there.
TEST_F(PipelineExchangeTest, AnalyticLeavesOverlappedSchedulesAlone) {
  layout.schedule = Schedule::kInterleaved;
  layout.vpp = 2;
  EXPECT_DOUBLE_EQ(simulate_analytic(model, cluster, sequential, layout).step_time_s,
                   simulate_analytic(model, cluster, batched, layout).step_time_s);
}

// The plan: every receive of a middle stage is a task of its own, one per
// micro-batch and direction (2·64); the first stage receives only gradients,
// the last only activations (64 each). A receive starts with the matching send.
TEST_F(PipelineExchangeTest, PlanHasABlockingReceivePerTransfer) {
  PlanOptions options;
  options.pipeline_exchange = PipelineExchange::kSequential;
  const Plan plan = build_plan(model, layout, options);
  EXPECT_TRUE(plan.shape.sequential_p2p);
  auto receives = [&](int stage) {
    int n = 0;
    for (std::uint32_t t = plan.stage_begin[stage]; t < plan.stage_begin[stage + 1]; ++t) {
      n += plan.tasks[t].kind == TaskKind::kPipelineReceive;
    }
    return n;
  };
  EXPECT_EQ(receives(0), 64);
  EXPECT_EQ(receives(3), 128);
  EXPECT_EQ(receives(7), 64);
  EXPECT_FALSE(build_plan(model, layout).shape.sequential_p2p);
}

// The event engine plays the same exchange. It exposes half the analytic
// model's transfers under batched exchange, m + p − 1 = 71 (a stage's send of
// activations runs beside its neighbour's send of gradients, which the
// analytic model charges both), and under sequential exchange 2m = 128 (the
// receive and the send of each exchange one after the other): a ratio of 1.80
// against the analytic 270/142 = 1.90.
TEST_F(PipelineExchangeTest, EventEngineExposesTheExtraReceives) {
  const SimulationResult b = simulate_event(model, cluster, batched, layout, {}).result;
  const SimulationResult s = simulate_event(model, cluster, sequential, layout, {}).result;
  EXPECT_NEAR(b.exposed_pp_s / p2p_s(), 71.0, 0.5);
  EXPECT_NEAR(s.exposed_pp_s / p2p_s(), 128.0, 0.5);
  EXPECT_GT(s.step_time_s, b.step_time_s);
  EXPECT_LE(s.step_time_s - b.step_time_s, 128 * p2p_s() * (1 + 1e-9));
}

}  // namespace
}  // namespace sextant::sim
