// `run --compare`'s renderings (tools/run_compare.h): the table, CSV, JSON and
// the report folder (the prediction and the rows: tests/reports/compare_prediction_test.cc).
#include "tools/run_compare.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "sim/core/config_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

TEST(RunCompare, ReportRowsErrorsAndCsv) {
  ComparePrediction p;
  p.step_time_s = 0.110;
  p.task_seconds_per_step = {{"layer*.attn.fwd", 0.020}, {"optimizer.step", 0.010}};
  // Measured 0.100 s step: +10 %; attention 0.025 s: (0.020 − 0.025)/0.025 = −20 %.
  CompareReport r = make_compare_report(p, 0.100, {{"layer*.attn.fwd", 0.025}, {"output.fwd", 0.001}});
  r.layout = "mbs=4,gbs=8,recompute=none";
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.step().task_kind, "step");
  EXPECT_NEAR(r.step().error, 0.10, 1e-12);
  EXPECT_EQ(r.rows[1].task_kind, "layer*.attn.fwd");
  EXPECT_NEAR(r.rows[1].error, -0.20, 1e-12);
  // The csv (the calibration report's points) keeps what was measured: not the
  // optimizer step, predicted but not timed here.
  EXPECT_EQ(compare_csv(r),
            "layout,task_kind,predicted_s,measured_s,error\n"
            "\"mbs=4,gbs=8,recompute=none\",step,0.11,0.1,0.100000\n"
            "\"mbs=4,gbs=8,recompute=none\",layer*.attn.fwd,0.02,0.025,-0.200000\n"
            "\"mbs=4,gbs=8,recompute=none\",output.fwd,0,0.001,-1.000000\n");
  EXPECT_NE(compare_table(r).find("optimizer.step"), std::string::npos);
}

// GPT-1.3B's step at sequence 2048 in `layout`, predicted and measured.
CompareReport gpt13b_step(double predicted_s, double measured_s, const sim::ParallelLayout& layout) {
  ComparePrediction p;
  p.step_time_s = predicted_s;
  CompareReport r = make_compare_report(p, measured_s, {});
  r.model = "gpt-1.3b";
  r.parallel_layout = layout;
  r.seq_length = 2048;
  return r;
}

TEST(RunCompare, JsonRoundTripsWhatTheFitReads) {
  sim::ParallelLayout l;
  l.mbs = 4;
  l.gbs = 16;
  l.recompute = sim::Recompute::kFull;
  const CompareReport r = gpt13b_step(0.2, 0.25, l);
  const CompareReport back = compare_from_json(compare_json(r), "run.json");
  EXPECT_EQ(back.model, "gpt-1.3b");
  EXPECT_EQ(back.layout, "mbs=4,gbs=16,recompute=full");
  EXPECT_EQ(back.parallel_layout.num_microbatches(), 4);
  EXPECT_DOUBLE_EQ(back.step().measured_s, 0.25);
  EXPECT_DOUBLE_EQ(back.step().predicted_s, 0.2);
  EXPECT_THROW(compare_from_json(nlohmann::json{{"model", "x"}}, "bad.json"), sim::ConfigError);
}

// An MoE run's measured load, which the prediction took: kept through the
// JSON and said in the table; absent (a dense run) it stays absent.
TEST(RunCompare, AnMoeRunsMeasuredExpertLoadIsKeptAndSaid) {
  sim::ParallelLayout l;
  l.mbs = 2;
  l.gbs = 16;
  CompareReport r = gpt13b_step(0.07, 0.075, l);
  EXPECT_FALSE(compare_json(r).contains("expert_load_factor"));
  EXPECT_FALSE(compare_from_json(compare_json(r), "run.json").expert_load_factor.has_value());
  r.expert_load_factor = 0.75;
  r.capacity_factor = 1.25;
  const CompareReport back = compare_from_json(compare_json(r), "run.json");
  ASSERT_TRUE(back.expert_load_factor.has_value());
  EXPECT_DOUBLE_EQ(*back.expert_load_factor, 0.75);
  EXPECT_DOUBLE_EQ(back.capacity_factor, 1.25);
  EXPECT_NE(compare_table(r).find("moe.expert_load_factor 0.750"), std::string::npos) << compare_table(r);
}

// A pipeline send's measurement holds the wait for the peer: shown, with no
// error, and left out of compare.csv (the calibration report's points).
TEST(RunCompare, PipelineSendsAreMeasuredWithTheirWait) {
  ComparePrediction p;
  p.step_time_s = 0.59;
  p.task_seconds_per_step = {{"chunk0.pp.send_fwd", 0.0022}, {"layer*.mlp.bwd", 0.160}};
  const CompareReport r = make_compare_report(p, 0.64, {{"chunk0.pp.send_fwd", 0.167}, {"layer*.mlp.bwd", 0.166}});
  ASSERT_EQ(r.rows.size(), 3u);
  const CompareRow& send = r.rows[1];  // by the larger of the two times: 167 ms measured
  EXPECT_EQ(send.task_kind, "chunk0.pp.send_fwd");
  EXPECT_TRUE(send.waits);
  EXPECT_EQ(send.error, 0.0);
  EXPECT_FALSE(r.rows[2].waits);
  EXPECT_NEAR(r.rows[2].error, -0.036, 1e-3);
  EXPECT_EQ(compare_csv(r).find("pp.send"), std::string::npos);
  EXPECT_NE(compare_table(r).find("with wait"), std::string::npos);
  EXPECT_TRUE(compare_json(r)["tasks"][0]["error"].is_null());
  EXPECT_TRUE(measurement_includes_wait("chunk1.pp.send_bwd", true));
  EXPECT_FALSE(measurement_includes_wait("pp.embedding_grad.all_reduce", true));
  EXPECT_TRUE(measurement_includes_wait("optimizer.step", true));
  EXPECT_FALSE(measurement_includes_wait("optimizer.step", false));
}

// A parallel run's comparison keeps its whole layout: read back, it is the same
// layout (not one GPU's at the same mbs and gbs), and its title names it.
TEST(RunCompare, JsonKeepsAParallelLayout) {
  const CompareReport r =
      gpt13b_step(0.9, 1.0, sim::layout_from_spec("tp=2,sp=1,pp=2,vpp=2,dp=2,zero=1,mbs=2,gbs=64"));
  ASSERT_EQ(r.parallel_layout.schedule, sim::Schedule::kInterleaved);
  const nlohmann::ordered_json j = compare_json(r);
  EXPECT_EQ(j["layout"]["gpus"], 8);
  const CompareReport back = compare_from_json(j, "run.json");
  EXPECT_EQ(back.parallel_layout.to_spec(), r.parallel_layout.to_spec());
  EXPECT_EQ(back.parallel_layout.num_microbatches(), 16);
  EXPECT_EQ(back.layout, "tp=2,sp=1,pp=2,vpp=2,dp=2,zero=1,mbs=2,gbs=64,recompute=none");
}


// --report DIR: the comparison's own files and the calibration report drawn
// from them (the same folder `sextant report calibration --runs DIR` reads).
TEST(RunCompare, ReportFolderHoldsTheComparisonAndItsPlots) {
  ComparePrediction p;
  p.step_time_s = 0.110;
  // A kind the engine does not time (a data-parallel bucket's reduction on its
  // own stream) stays in compare.md, out of the report's points.
  p.task_seconds_per_step = {{"layer*.attn.fwd", 0.020}, {"optimizer.step", 0.010}, {"dp.all_reduce.bucket0", 0.004}};
  CompareReport r = make_compare_report(p, 0.100, {{"layer*.attn.fwd", 0.025}, {"optimizer.step", 0.011}});
  r.model = "gpt-350m";
  r.layout = "mbs=4,gbs=8,recompute=none";
  sextant::testing::TempDir dir;
  write_compare_report(r, dir.file("report"));
  for (const char* f : {"compare.md", "compare.csv", "compare.json", "report.html", "report.md",
                        "report.csv", "scatter.svg", "task_kinds.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(dir.file("report") + "/" + f)) << f;
  }
}

}  // namespace
}  // namespace sextant::tools
