// Report specs (reports/report_spec.h): defaults, layouts, references, and
// every mistake reported at its file:line:col.
#include "reports/report_spec.h"

#include <gtest/gtest.h>

#include "sim/core/config_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::reports {
namespace {

using testing::TempDir;
using testing::write_file;

std::string diagnostics_of(const std::string& path) {
  try {
    load_report_spec(path);
  } catch (const sim::ConfigError& e) {
    std::string all;
    for (const sim::Diagnostic& d : e.diagnostics()) all += d.to_string() + "\n";
    return all;
  }
  return "";
}

TEST(ReportSpec, RowsTakeDefaultsAndOverrideThem) {
  TempDir dir;
  write_file(dir.file("s.yaml"),
             "title: T\n"
             "defaults:\n"
             "  cluster: dgx-h100\n"
             "  model: gpt3-175b\n"
             "  global_batch: 1152\n"
             "  layout: zero=1,tp=8\n"
             "  search: {tp_within_node: true}\n"
             "rows:\n"
             "  - gpus: 96\n"
             "    published: {mfu: 0.47, source: README}\n"
             "  - gpus: 4608\n"
             "    layout: tp=4,pp=8\n"
             "    vocab_size: 131072\n"
             "    measured: {step_time_s: 2.5, source: our run}\n");
  const ReportSpec spec = load_report_spec(dir.file("s.yaml"));
  ASSERT_EQ(spec.rows.size(), 2u);
  const ReportRowSpec& a = spec.rows[0];
  EXPECT_EQ(a.label, "96");
  EXPECT_EQ(a.model, "gpt3-175b");
  EXPECT_EQ(*a.layout.tp, 8);
  EXPECT_EQ(*a.layout.zero, 1);
  EXPECT_EQ(*a.layout.gbs, 1152);
  EXPECT_FALSE(a.layout.pp.has_value());  // searched
  EXPECT_TRUE(a.constraints.tp_within_node);
  EXPECT_EQ(a.reference->metric, ReferenceMetric::kMfu);
  EXPECT_DOUBLE_EQ(a.reference->value, 0.47);
  EXPECT_FALSE(a.reference->measured);
  const ReportRowSpec& b = spec.rows[1];
  EXPECT_EQ(*b.layout.tp, 4);  // the row's knob wins
  EXPECT_EQ(*b.layout.pp, 8);
  EXPECT_EQ(*b.layout.zero, 1);  // the default's stays
  EXPECT_EQ(*b.vocab_size, 131072);
  EXPECT_EQ(b.reference->metric, ReferenceMetric::kStepTime);
  EXPECT_TRUE(b.reference->measured);
  EXPECT_EQ(spec.engine, ReportEngine::kAnalytic);
}

TEST(ReportSpec, ReportsEveryMistakeAtItsPlace) {
  TempDir dir;
  write_file(dir.file("bad.yaml"),
             "title: T\n"
             "colour: red\n"
             "rows:\n"
             "  - model: gpt3-175b\n"
             "    cluster: dgx-h100\n"
             "    gpus: 8\n"
             "    global_batch: 16\n"
             "    layout: tp=3x\n"
             "    publishd: {mfu: 0.4}\n"
             "  - model: gpt3-175b\n"
             "    gpus: 8\n"
             "    global_batch: 16\n"
             "    published: {mfu: 0.4, step_time_s: 2, source: x}\n");
  const std::string d = diagnostics_of(dir.file("bad.yaml"));
  EXPECT_NE(d.find("bad.yaml:2:1: colour: unknown key; accepted keys: title, notes"),
            std::string::npos) << d;
  EXPECT_NE(d.find("bad.yaml:8:13: rows[0].layout: tp:"), std::string::npos) << d;
  EXPECT_NE(d.find("bad.yaml:9:5: rows[0].publishd: unknown key"), std::string::npos) << d;
  EXPECT_NE(d.find("bad.yaml:10:5: rows[1].cluster: required (in the row or in defaults)"), std::string::npos) << d;
  EXPECT_NE(d.find("bad.yaml:13:16: rows[1].published: give exactly one of mfu"), std::string::npos)
      << d;
}

TEST(ReportSpec, MissingFileAndMissingRows) {
  EXPECT_NE(diagnostics_of("/nonexistent/spec.yaml").find("cannot open report spec"),
            std::string::npos);
  TempDir dir;
  write_file(dir.file("empty.yaml"), "title: T\n");
  EXPECT_NE(diagnostics_of(dir.file("empty.yaml")).find("rows: expected a non-empty list of rows"),
            std::string::npos);
}

TEST(ReportSpec, SweepSpecFromFlags) {
  const ReportSpec spec = sweep_spec("llama3-70b", "dgx-h100", {64, 128}, 1024, "tp=8", {});
  ASSERT_EQ(spec.rows.size(), 2u);
  EXPECT_EQ(spec.rows[1].gpus, 128);
  EXPECT_EQ(*spec.rows[1].layout.gbs, 1024);
  EXPECT_EQ(*spec.rows[1].layout.tp, 8);
  EXPECT_THROW(sweep_spec("m", "c", {64}, 1024, "gbs=512", {}), sim::ConfigError);
  EXPECT_THROW(sweep_spec("m", "c", {}, 1024, "", {}), sim::ConfigError);
}

}  // namespace
}  // namespace sextant::reports
