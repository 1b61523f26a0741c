// `run --compare`'s prediction side (reports/compare_prediction.h) and the
// rows made of it (reports/compare_report.h).
#include "reports/compare_prediction.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "reports/compare_report.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"

namespace sextant::reports {
namespace {

// GPT-350M without dropout (the engine has none), predicted on a DGX H100 with
// the measured-profile fixture.
ComparePrediction predict_gpt350m(const sim::ParallelLayout& layout) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  sim::ModelConfig m = catalog.model("gpt-350m");
  m.hidden_dropout = m.attention_dropout = 0;
  const sim::CostProfile profile = sim::load_profile_file(
      std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
  return predict_for_compare(m, catalog.cluster("dgx-h100"), profile, layout);
}

TEST(ComparePrediction, PredictionSumsTheStagesTasksByKind) {
  sim::ParallelLayout l;
  l.mbs = 4;
  l.gbs = 8;  // two micro-batches
  const ComparePrediction p = predict_gpt350m(l);
  // One GPU: the step is the sum of its tasks, every one on the compute stream;
  // the tasks are predicted with a stream launch (4 µs in the fixture) after each
  // kernel instead of the graph's 1.5 µs, so their sum is the step plus 2.5 µs
  // per kernel of the step.
  double sum = 0;
  for (const auto& [kind, s] : p.task_seconds_per_step) sum += s;
  // Kernels: per layer and micro-batch 7 forward (norm, QKV, attention, projection,
  // norm, fc1, fc2) and 13 backward (projection 2, attention 1, QKV 3 with its bias
  // gradient, norm 1, fc2 2, fc1 3, norm 1); embedding 1 + 1; output 3 + 3:
  // 2·(24·20 + 8) = 976, and the optimizer's 4 (norm, clip, AdamW twice) = 980.
  EXPECT_NEAR((sum - p.step_time_s) / 2.5e-6, 980, 1e-3);
  // 24 layers x 2 micro-batches of attention forwards, each the same.
  ASSERT_TRUE(p.task_seconds_per_step.count("layer*.attn.fwd"));
  ASSERT_TRUE(p.task_seconds_per_step.count("optimizer.step"));
  EXPECT_FALSE(p.step_time_interval_s);  // the fixture has no fit
}

// A pipeline: each stage's compute predicted (the last holds the output
// layer), and with each stage's measured compute one row per stage.
TEST(ComparePrediction, PipelineStagesComputeRows) {
  sim::ParallelLayout l;
  l.pp = 4;
  l.mbs = 2;
  l.gbs = 16;
  const ComparePrediction p = predict_gpt350m(l);
  ASSERT_EQ(p.stage_compute_s.size(), 4u);
  // 24 layers, 6 a stage; the first adds the embedding, the last the output layer.
  EXPECT_GT(p.stage_compute_s[3], p.stage_compute_s[1]);
  EXPECT_GT(p.stage_compute_s[0], p.stage_compute_s[1]);
  EXPECT_DOUBLE_EQ(p.stage_compute_s[1], p.stage_compute_s[2]);
  EXPECT_TRUE(p.compute_kinds.count("output.fwd"));
  EXPECT_FALSE(p.compute_kinds.count("optimizer.step"));
  // Stage 0's measured tasks: its compute kinds summed, the send and the optimizer left out.
  const std::map<std::string, double> stage0 = {
      {"layer*.attn.fwd", 0.010}, {"embedding.fwd", 0.001}, {"chunk0.pp.send_fwd", 0.050}, {"optimizer.step", 0.004}};
  EXPECT_DOUBLE_EQ(measured_compute_s(p, stage0), 0.011);
  const std::vector<double> measured = {1.0 * p.stage_compute_s[0], p.stage_compute_s[1], p.stage_compute_s[2],
                                        1.25 * p.stage_compute_s[3]};
  const CompareReport r = make_compare_report(p, 2 * p.step_time_s, stage0, measured);
  ASSERT_GE(r.rows.size(), 5u);
  EXPECT_EQ(r.rows[4].task_kind, "stage3.compute");
  EXPECT_NEAR(r.rows[4].error, -0.2, 1e-12);
  EXPECT_EQ(r.rows[1].task_kind, "stage0.compute");
  EXPECT_NEAR(r.rows[1].error, 0.0, 1e-12);
  // Without every stage's measurement, no stage rows.
  EXPECT_EQ(make_compare_report(p, p.step_time_s, stage0).rows[1].task_kind.rfind("stage", 0), std::string::npos);
}

// cp_comm_type=all_gather: the engine runs the attention core and its K/V
// exchanges inside the attention task, so the prediction names them so — no
// "attn.core" or ".cp." kinds — and counts the exchanges as the stage's compute,
// as the engine's measured attention task does. The total is unchanged.
TEST(ComparePrediction, AllGatherContextParallelFoldsIntoTheAttentionTask) {
  sim::ParallelLayout l;
  l.cp = 2;
  l.mbs = 1;
  l.gbs = 1;
  l.cp_comm_type = sim::CpCommType::kAllGather;
  const ComparePrediction gather = predict_gpt350m(l);
  double total = 0;
  for (const auto& [kind, s] : gather.task_seconds_per_step) {
    EXPECT_EQ(kind.find("core"), std::string::npos) << kind;
    EXPECT_EQ(kind.find(".cp."), std::string::npos) << kind;
    total += s;
  }
  ASSERT_TRUE(gather.task_seconds_per_step.count("layer*.attn.bwd"));
  EXPECT_TRUE(gather.compute_kinds.count("layer*.attn.bwd"));
  EXPECT_GT(total, 0);
  EXPECT_GT(gather.stage_compute_s.at(0), 0);
}

// cp_comm_type=p2p: the engine's ring runs inside its attention task too, the
// K/V exchanges beside the core. Its attention kinds are the longer of the
// core task and the ring task that runs beside it — with the engine's
// measured profile the ring task is the core plus what the exchanges leave
// exposed (sim/comm/context_ring_overlap.h), so at least the core's time — and
// the step is unchanged by the folding.
TEST(ComparePrediction, RingContextParallelFoldsIntoTheAttentionTaskAsItsSpan) {
  sim::ParallelLayout l;
  l.cp = 2;
  l.mbs = 1;
  l.gbs = 1;
  l.cp_comm_type = sim::CpCommType::kP2p;
  const ComparePrediction ring = predict_gpt350m(l);
  for (const auto& [kind, s] : ring.task_seconds_per_step) {
    EXPECT_EQ(kind.find("core"), std::string::npos) << kind;
    EXPECT_EQ(kind.find(".cp."), std::string::npos) << kind;
  }
  ASSERT_TRUE(ring.task_seconds_per_step.count("layer*.attn.fwd"));
  ASSERT_TRUE(ring.task_seconds_per_step.count("layer*.attn.bwd"));
  EXPECT_TRUE(ring.compute_kinds.count("layer*.attn.bwd"));
  // The same layout under all_gather runs the same projections and norm in the
  // attention task; only the core and its exchanges differ. Neither variant's
  // attention can take less than the other's projections alone.
  l.cp_comm_type = sim::CpCommType::kAllGather;
  const ComparePrediction gather = predict_gpt350m(l);
  const double ring_bwd = ring.task_seconds_per_step.at("layer*.attn.bwd");
  const double gather_bwd = gather.task_seconds_per_step.at("layer*.attn.bwd");
  EXPECT_GT(ring_bwd, 0);
  // gpt-350m at cp 2 (1024 tokens a rank): the ring's two steps and the gather's
  // two chunk calls do the same attention work; within a factor of two of each other.
  EXPECT_LT(ring_bwd, 2 * gather_bwd);
  EXPECT_GT(ring_bwd, 0.5 * gather_bwd);
  // Stage 0's compute is the sum of its compute kinds' tasks: the attention
  // kinds counted once, as spans.
  double kinds = 0;
  for (const std::string& kind : ring.compute_kinds) kinds += ring.task_seconds_per_step.at(kind);
  EXPECT_NEAR(ring.stage_compute_s.at(0), kinds, 1e-12 * kinds);
}

}  // namespace
}  // namespace sextant::reports
