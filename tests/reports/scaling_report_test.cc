// Scaling report rows, their arithmetic against references, the table and the
// written folder (reports/scaling_rows.h, scaling_table.h, scaling_plots.h,
// scaling_report.h).
#include "reports/scaling_report.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>

#include "reports/scaling_table.h"
#include "sim/core/preset_catalog.h"
#include "tests/support/temp_dir.h"

namespace sextant::reports {
namespace {

// A row with a hand-made result: `gpus` GPUs, step `step_s`, model FLOPs
// `flops` per step, 1e15 FLOP/s peak, 1024 sequences of 2048 tokens.
ReportRow made_row(long gpus, double step_s, double flops) {
  ReportRow r;
  r.spec.gpus = gpus;
  r.spec.label = std::to_string(gpus);
  r.spec.global_batch = 1024;
  r.model.name = "m";
  r.model.seq_length = 2048;
  r.peak_flops_per_s = 1e15;
  sim::SimulationResult s;
  s.layout.gbs = 1024;
  s.layout.dp = static_cast<int>(gpus);
  s.step_time_s = step_s;
  s.model_flops_per_step = flops;
  s.tokens_per_s = 1024.0 * 2048.0 / step_s;
  s.tokens_per_s_per_gpu = s.tokens_per_s / static_cast<double>(gpus);
  s.mfu = flops / (step_s * static_cast<double>(gpus) * 1e15);
  s.time.compute_s = 0.8 * step_s;
  s.exposed_dp_s = 0.2 * step_s;
  s.time.exposed_communication_s = 0.2 * step_s;
  r.result = s;
  return r;
}

TEST(ScalingRows, ReferenceErrorsInTheirMetric) {
  // 64 GPUs, 10 s, 2.56e17 FLOPs: MFU = 2.56e17 / (10 · 64 · 1e15) = 0.40.
  ReportRow r = made_row(64, 10, 2.56e17);
  r.spec.reference = ReferenceValue{ReferenceMetric::kMfu, 0.44, "paper"};
  // MFU error in points: 100 · (0.40 − 0.44) = −4.
  EXPECT_NEAR(reference_error(r), -4.0, 1e-9);
  // The step time that gives MFU 0.44: 10 · 0.40 / 0.44 = 9.0909 s.
  EXPECT_NEAR(*reference_step_time_s(r), 10 * 0.40 / 0.44, 1e-9);
  r.spec.reference = ReferenceValue{ReferenceMetric::kStepTime, 12.5, "run"};
  // Step-time error: (10 − 12.5) / 12.5 = −20 %.
  EXPECT_NEAR(reference_error(r), -20.0, 1e-9);
  EXPECT_DOUBLE_EQ(*reference_step_time_s(r), 12.5);
  // TFLOP/s per GPU predicted: 2.56e17 / 10 / 64 / 1e12 = 400; published 500 → −20 %.
  r.spec.reference = ReferenceValue{ReferenceMetric::kTflopsPerGpu, 500, "x"};
  EXPECT_NEAR(predicted_metric(r, ReferenceMetric::kTflopsPerGpu), 400, 1e-9);
  EXPECT_NEAR(reference_error(r), -20.0, 1e-9);
}

TEST(ScalingRows, EfficiencyAgainstTheSmallestPoint) {
  // Strong: 64 GPUs at 10 s, 128 at 5.5 s. Tokens/s per GPU: 1024·2048/10/64 and
  // 1024·2048/5.5/128, ratio (10 · 64) / (5.5 · 128) = 0.90909.
  const std::vector<ReportRow> rows = {made_row(128, 5.5, 2.56e17), made_row(64, 10, 2.56e17)};
  const std::vector<double> e = scaling_efficiency_percent(rows, ScalingKind::kStrong);
  EXPECT_NEAR(e[0], 100 * 640.0 / 704.0, 1e-9);
  EXPECT_NEAR(e[1], 100, 1e-12);
}

TEST(ScalingRows, SearchedKnobsAreThoseLeftOut) {
  sim::PartialLayout partial;
  partial.tp = 8;
  partial.gbs = 1024;
  sim::ParallelLayout complete;
  complete.tp = 8;
  complete.pp = 4;
  complete.vpp = 3;
  complete.recompute = sim::Recompute::kSelective;
  const std::vector<std::string> k = searched_knobs(partial, complete);
  EXPECT_EQ(k[0], "pp=4");
  EXPECT_EQ(k[1], "vpp=3");
  EXPECT_NE(std::find(k.begin(), k.end(), "recompute=selective"), k.end());
  EXPECT_EQ(std::find(k.begin(), k.end(), "ep=1"), k.end());  // dense: expert knobs left out
}

TEST(ScalingTable, CellsOfAPredictedRowWithItsReference) {
  ReportRow r = made_row(64, 10, 2.56e17);
  r.spec.reference = ReferenceValue{ReferenceMetric::kMfu, 0.44, "paper"};
  const Table t = scaling_table({r});
  auto cell = [&](const std::string& header) {
    const auto at = std::find(t.header.begin(), t.header.end(), header);
    EXPECT_NE(at, t.header.end()) << header;
    return t.rows[0][static_cast<std::size_t>(at - t.header.begin())];
  };
  EXPECT_EQ(cell("MFU (%)"), "40.0");
  EXPECT_EQ(cell("model TFLOP/s/GPU"), "400.0");
  EXPECT_EQ(cell("aggregate PFLOP/s"), "25.6");  // 2.56e17 / 10 / 1e15
  EXPECT_EQ(cell("tokens/s/GPU"), "3277");       // 1024 · 2048 / 10 / 64 = 3276.8
  EXPECT_EQ(cell("published MFU (%)"), "44.0");
  EXPECT_EQ(cell("MFU error (pt)"), "-4.0");
  EXPECT_EQ(cell("src"), "[1]");
  EXPECT_EQ(std::find(t.header.begin(), t.header.end(), "step time interval (s)"), t.header.end());
  r.step_time_interval = StepTimeInterval{9.5, 10.5};
  EXPECT_EQ(scaling_table({r}).rows[0][22], "9.500–10.500");
}

TEST(ScalingReport, WeakScalingOfTwoPresetModelsWritesASelfContainedFolder) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  ReportSpec spec;
  spec.title = "two rows";
  spec.source = "a test";
  for (auto [model, gpus, gbs] : {std::tuple{"megatron-weak-1.7b", 48L, 192},
                                  std::tuple{"megatron-weak-7.1b", 96L, 192}}) {
    ReportRowSpec row;
    row.model = model;
    row.cluster = "dgx-h100";
    row.gpus = gpus;
    row.global_batch = gbs;
    row.label = model;
    row.layout.gbs = gbs;
    row.layout.dp = 48;
    spec.rows.push_back(row);
  }
  spec.rows[0].reference = ReferenceValue{ReferenceMetric::kMfu, 0.41, "README"};
  const std::vector<ReportRow> rows = evaluate_rows(spec, catalog);
  ASSERT_TRUE(rows[0].result && rows[1].result);
  // 96 GPUs / dp 48 leave tp·pp·cp = 2, split by the search, which says so.
  const sim::ParallelLayout& l = rows[1].result->layout;
  EXPECT_EQ(l.tp * l.pp * l.cp, 2);
  EXPECT_NE(std::find(rows[1].searched.begin(), rows[1].searched.end(),
                      "tp=" + std::to_string(l.tp)),
            rows[1].searched.end());
  testing::TempDir dir;
  const std::string out = dir.file("report");
  const std::vector<std::string> files =
      write_scaling_report(rows, {"two rows", "", "a test", "analytic", ScalingKind::kWeak}, out);
  EXPECT_EQ(files.front(), "report.html");
  for (const std::string& f : files) EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  const std::string html = testing::read_file(out + "/report.html");
  // Self-contained: no scripts, links, images or fetches; every plot inline.
  for (const char* absent : {"<script", "<link", "<img", "src=", "url("}) {
    EXPECT_EQ(html.find(absent), std::string::npos) << absent;
  }
  EXPECT_EQ(std::count(files.begin(), files.end(), "mfu.svg"), 1);
  std::size_t svgs = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, files.size() - 3);  // every .svg written is inline too
}

}  // namespace
}  // namespace sextant::reports

namespace sextant::reports {
namespace {

// Results that carry a step-time interval in the shapes the calibration work
// may give it, and one without it.
struct WithOptionalPair {
  std::optional<std::pair<double, double>> step_time_interval_s;
};
struct Bounds {
  double low_s, high_s;
};
struct WithStruct {
  Bounds step_time_interval_s;
};
struct WithArray {
  std::array<double, 2> step_time_interval_s;
};
struct Without {
  double step_time_s;
};

TEST(ScalingRows, ReadsAStepTimeIntervalWhateverItsShape) {
  EXPECT_DOUBLE_EQ(step_time_interval_of(WithOptionalPair{{{1.5, 2.5}}})->high_s, 2.5);
  EXPECT_FALSE(step_time_interval_of(WithOptionalPair{}).has_value());
  EXPECT_DOUBLE_EQ(step_time_interval_of(WithStruct{{0.9, 1.1}})->low_s, 0.9);
  EXPECT_DOUBLE_EQ(step_time_interval_of(WithArray{{{3, 4}}})->high_s, 4);
  EXPECT_FALSE(step_time_interval_of(Without{1.0}).has_value());
}

}  // namespace
}  // namespace sextant::reports

namespace sextant::reports {
namespace {

TEST(ScalingReport, RowsWithoutAResultStayInTheTableAndOutOfThePlots) {
  ReportRow failed;
  failed.spec.gpus = 8;
  failed.spec.global_batch = 16;
  failed.model.name = "big";
  failed.model.seq_length = 2048;
  failed.failure = "the smallest layout needs 95.0 GiB";
  const std::vector<ReportRow> rows = {made_row(64, 10, 2.56e17), failed};
  const Table t = scaling_table(rows);
  EXPECT_EQ(t.rows[1].back(), "not predicted: the smallest layout needs 95.0 GiB");
  EXPECT_EQ(t.rows[1][18], "-");  // MFU
  // One point still gives every plot but the reference comparison (no reference).
  const std::vector<NamedPlot> plots = scaling_plots(rows, ScalingKind::kStrong);
  ASSERT_EQ(plots.size(), 4u);
  EXPECT_EQ(plots[0].file, "mfu.svg");
  EXPECT_EQ(scaling_summary(rows, ScalingKind::kStrong).front(),
            "1 of 2 rows predicted (see the table for why not).");
  EXPECT_TRUE(scaling_plots({failed}, ScalingKind::kWeak).empty());
}

}  // namespace
}  // namespace sextant::reports
