// `sextant report ...` as a user runs it: the files written, and bad input
// answered with exit code 2 and a message naming the option or file:line:col.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/run_sextant.h"

namespace sextant::testing {
namespace {

TEST(ReportCommand, FlagSweepWritesEveryFile) {
  TempDir dir;
  const CommandResult r = run_sextant(
      dir, "report strong-scaling --model gpt-350m --cluster dgx-h100 --gpus 8,16 "
           "--global-batch 64 --out out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 of 2 rows predicted."), std::string::npos) << r.out;
  for (const char* f : {"report.html", "report.md", "report.csv", "mfu.svg", "throughput.svg",
                        "efficiency.svg", "breakdown.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "out" / f)) << f;
  }
  // Header plus one CRLF-ended line per GPU count.
  const std::string csv = read_file(dir.file("out/report.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("\r\ngpt-350m,"), std::string::npos);
}

TEST(ReportCommand, BadInputExitsWithTwo) {
  TempDir dir;
  write_file(dir.file("s.yaml"), "title: T\nrows:\n  - model: gpt-350m\n    gpus: 8\n    colour: red\n");
  CommandResult r = run_sextant(dir, "report weak-scaling --spec s.yaml --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("s.yaml:5:5: rows[0].colour: unknown key"), std::string::npos) << r.err;
  r = run_sextant(dir, "report strong-scaling --model gpt-350m --cluster dgx-h100 "
                       "--gpus 8,100000 --global-batch 64 --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--gpus: 100000 GPUs, but cluster dgx-h100 has"), std::string::npos)
      << r.err;
  r = run_sextant(dir, "report strong-scaling --spec s.yaml --model gpt-350m --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give either --spec FILE or --model"), std::string::npos) << r.err;
  r = run_sextant(dir, "report calibration --runs nowhere --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nowhere/compare.csv: cannot open"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sextant::testing
