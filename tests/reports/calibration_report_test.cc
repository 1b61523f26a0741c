// Predicted-against-measured reports from a `run --compare` folder
// (reports/calibration_report.h), on the fixture tests/data/calibration.
#include "reports/calibration_report.h"

#include <gtest/gtest.h>

#include "sim/core/config_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::reports {
namespace {

using testing::TempDir;

TEST(CalibrationReport, ReadsTheFixtureWithQuotedLayouts) {
  const std::vector<CalibrationPoint> points =
      load_calibration_points(std::string(SEXTANT_TEST_DATA_DIR) + "/calibration");
  ASSERT_EQ(points.size(), 13u);
  EXPECT_EQ(points[0].layout, "tp=1,pp=1,dp=1,mbs=4,gbs=32");
  EXPECT_EQ(points[0].task_kind, "gemm");
  // (0.00412 − 0.00398) / 0.00398 = 0.035176
  EXPECT_NEAR(points[0].error, 0.00014 / 0.00398, 1e-12);
  EXPECT_EQ(points[10].task_kind, "tp.all_reduce");
}

std::string diagnostics_of(const std::string& folder) {
  try {
    load_calibration_points(folder);
  } catch (const sim::ConfigError& e) {
    std::string all;
    for (const sim::Diagnostic& d : e.diagnostics()) all += d.to_string() + "\n";
    return all;
  }
  return "";
}

TEST(CalibrationReport, BadFilesAreReportedByLine) {
  TempDir dir;
  EXPECT_NE(diagnostics_of(dir.path().string()).find("compare.csv: cannot open"), std::string::npos);
  testing::write_file(dir.file("compare.csv"), "layout,kind,p,m,e\n");
  EXPECT_NE(diagnostics_of(dir.path().string()).find("compare.csv:1:1: the header must be exactly"),
            std::string::npos);
  testing::write_file(dir.file("compare.csv"),
                      "layout,task_kind,predicted_s,measured_s,error\n"
                      "a,gemm,0.1,0.1,0\n"
                      "a,gemm,fast,0,0\n");
  const std::string d = diagnostics_of(dir.path().string());
  EXPECT_NE(d.find("compare.csv:3: predicted_s: expected a number of seconds >= 0, got 'fast'"),
            std::string::npos) << d;
  EXPECT_NE(d.find("compare.csv:3: measured_s: expected a number of seconds > 0"), std::string::npos)
      << d;
}

TEST(CalibrationReport, WritesTablesAndPlots) {
  const std::vector<CalibrationPoint> points =
      load_calibration_points(std::string(SEXTANT_TEST_DATA_DIR) + "/calibration");
  TempDir dir;
  const auto files = write_calibration_report(points, {"calibration", "the fixture"}, dir.file("out"));
  ASSERT_EQ(files.size(), 5u);
  const std::string md = testing::read_file(dir.file("out/report.md"));
  // gemm: predicted 0.00412+0.00206+0.00824+0.00208 = 0.0165, measured 0.01616;
  // total error (0.0165 − 0.01616) / 0.01616 = +2.1 %; all 4 within ±5 %.
  EXPECT_NE(md.find("| gemm | 4 | 0.016500 | 0.016160 | +2.1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("4 of 4 |"), std::string::npos);
  // 7 of 13 within ±5 %: gemm 4, optimizer 1 (4.5 %), step 2 (2.7 %, 4.6 %).
  EXPECT_NE(md.find("13 tasks of 7 kinds compared; 7 predicted within ±5 %"), std::string::npos);
  const std::string csv = testing::read_file(dir.file("out/report.csv"));
  EXPECT_NE(csv.find("\"tp=2,pp=1,dp=4,mbs=2,gbs=64\",tp.all_reduce,0.000930000,0.001210000,-0.2314\r\n"),
            std::string::npos) << csv;
  const std::string scatter = testing::read_file(dir.file("out/scatter.svg"));
  EXPECT_NE(scatter.find(">±5 %<"), std::string::npos);
  EXPECT_NE(scatter.find(">y = x<"), std::string::npos);
}

}  // namespace
}  // namespace sextant::reports
