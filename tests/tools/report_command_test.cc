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

namespace sextant::testing {
namespace {

// Issue 29, item 11: an unknown model in a spec is said once, at the spec's
// line, before any row is searched or any file written.
TEST(ReportCommand, UnknownModelInASpecIsReportedOnceAtItsLine) {
  TempDir dir;
  write_file(dir.file("s.yaml"),
             "title: T\n"                     // 1
             "defaults:\n"                    // 2
             "  model: gpt-9000\n"            // 3
             "  cluster: dgx-h100\n"          // 4
             "  global_batch: 64\n"           // 5
             "rows:\n"                        // 6
             "  - gpus: 8\n"                  // 7
             "  - gpus: 16\n"                 // 8
             "  - {gpus: 32, model: gpt-9001}\n");  // 9
  const CommandResult r = run_sextant(dir, "report strong-scaling --spec s.yaml --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const std::string head = "sextant: error: s.yaml:3:10: defaults.model: no model preset named 'gpt-9000' in ";
  EXPECT_EQ(r.err.substr(0, head.size()), head) << r.err;
  EXPECT_NE(r.err.find("\nsextant: error: s.yaml:9:23: rows[2].model: no model preset named 'gpt-9001' in "),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("accepted: a path to a .yaml file or one of: "), std::string::npos) << r.err;
  // Once each, although two rows take gpt-9000 from the defaults.
  std::size_t count = 0;
  for (std::size_t at = r.err.find("'gpt-9000'"); at != std::string::npos;
       at = r.err.find("'gpt-9000'", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
}

TEST(ReportCommand, AFolderAsSpecAndWeakScalingWithoutASpec) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("specs"));
  write_file(dir.file("specs/b.yaml"), "title: T\n");
  write_file(dir.file("specs/a.yaml"), "title: T\n");
  CommandResult r = run_sextant(dir, "report weak-scaling --spec specs --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sextant: error: --spec: 'specs' is a folder, expected a report spec YAML file "
                   "(e.g. specs/a.yaml)\n");
  // weak-scaling takes no --model, --cluster or --gpus: only --spec is suggested.
  r = run_sextant(dir, "report weak-scaling --out out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sextant: error: --spec: required: weak scaling changes the model with the GPU "
                   "count, so its rows come from a report spec, e.g. --spec "
                   "configs/reports/megatron-weak-h100.yaml\n");
}

}  // namespace
}  // namespace sextant::testing

namespace sextant::testing {
namespace {

TEST(ReportCommand, AMistypedModelInASpecGetsASuggestion) {
  TempDir dir;
  write_file(dir.file("s.yaml"),
             "title: T\nrows:\n  - {model: gpt-35m, cluster: dgx-h100, gpus: 8, global_batch: 64}\n");
  const CommandResult r = run_sextant(dir, "report strong-scaling --spec s.yaml --out out");
  EXPECT_EQ(r.exit_code, 2);
  const std::string head = "sextant: error: s.yaml:3:13: rows[0].model: no model preset named "
                           "'gpt-35m' (did you mean gpt-350m?) in ";
  EXPECT_EQ(r.err.substr(0, head.size()), head) << r.err;
}

}  // namespace
}  // namespace sextant::testing
