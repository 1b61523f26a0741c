// The tied embedding's gradient all-reduce between the first and last stage,
// in both engines (parallel_comm.h: tied_embedding_reduce_time_s).
#include <gtest/gtest.h>

#include "sim/analytic/analytic_model.h"
#include "sim/comm/parallel_comm.h"
#include "sim/plan/plan_builder.h"
#include "sim/plan/task_writer.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

struct TiedEmbeddingReduce : ::testing::Test {
  ModelConfig model = [] {
    ModelConfig m = testing::gpt3_175b();
    m.tie_embeddings = true;
    return m;
  }();
  ClusterConfig cluster = testing::dgx_a100();
  CostProfile profile = testing::ideal_profile("a100-sxm-80gb");
  LinkRates links = link_rates(cluster, profile);
  ParallelLayout layout = [] {
    ParallelLayout l;
    l.tp = 8;
    l.pp = 8;
    l.dp = 8;
    l.mbs = 1;
    l.gbs = 64;
    l.recompute = Recompute::kFull;
    return l;
  }();
};

// GPT-3 175B, tp 8: each end holds 51200·12288/8 = 78,643,200 embedding
// parameters, reduced in fp32 (bf16 training): 314,572,800 bytes. Two ranks
// 7·64 GPUs apart, so over the network: a two-rank ring moves 2·(1/2) of the
// buffer, 314572800/25e9 = 12.583 ms, plus the latency terms (< 0.1 ms here).
TEST_F(TiedEmbeddingReduce, OneBufferOverTheNetwork) {
  const double t = tied_embedding_reduce_time_s(model, layout, cluster, links);
  EXPECT_NEAR(t, 314572800.0 / 25e9, 1e-4);
  EXPECT_GT(t, 314572800.0 / 25e9);
  ParallelLayout one_stage = layout;
  one_stage.pp = 1;
  EXPECT_EQ(tied_embedding_reduce_time_s(model, one_stage, cluster, links), 0.0);
  model.tie_embeddings = false;
  EXPECT_EQ(tied_embedding_reduce_time_s(model, layout, cluster, links), 0.0);
}

// The plan: one reduce task on the first and on the last stage, none between,
// and each stage's optimizer step waits for it.
TEST_F(TiedEmbeddingReduce, PlanReducesOnTheTwoEndsBeforeTheOptimizer) {
  const Plan plan = build_plan(model, layout);
  for (int stage = 0; stage < layout.pp; ++stage) {
    std::uint32_t reduce = kNoTask, step = kNoTask;
    for (std::uint32_t t = plan.stage_begin[stage]; t < plan.stage_begin[stage + 1]; ++t) {
      if (plan.tasks[t].kind == TaskKind::kTiedEmbeddingReduce) reduce = t;
      if (plan.tasks[t].kind == TaskKind::kOptimizerStep) step = t;
    }
    const bool end = stage == 0 || stage == layout.pp - 1;
    EXPECT_EQ(reduce != kNoTask, end) << "stage " << stage;
    if (end && reduce != kNoTask) {
      bool waits = false;
      for (std::uint32_t d : plan.deps_of(step)) waits = waits || d == reduce;
      EXPECT_TRUE(waits) << "stage " << stage;
    }
  }
}

}  // namespace
}  // namespace sextant::sim
