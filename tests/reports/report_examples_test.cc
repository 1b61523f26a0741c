// The example reports committed under reports/examples/ are what the current
// build writes: each is regenerated from its spec and compared byte for byte,
// so they never go stale. When the simulator changes on purpose, refresh them
// with `sh reports/examples/refresh.sh` (from the repository root, after building).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "tests/support/temp_dir.h"

namespace sextant::reports {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRefresh =
    "refresh the examples with `sh reports/examples/refresh.sh` (from the repository root, "
    "after building) if the change is intended";

// Runs `sextant <arguments> --out <out>` in the source folder (the reports name
// their spec by the relative path a user types).
int run_report(const std::string& arguments, const std::string& out) {
  const std::string command = "cd '" SEXTANT_TEST_SOURCE_DIR "' && '" SEXTANT_BINARY "' " +
                              arguments + " --out '" + out + "' >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::set<std::string> files_in(const fs::path& folder) {
  std::set<std::string> names;
  if (!fs::is_directory(folder)) return names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().filename() != ".gitattributes") {
      names.insert(entry.path().filename().string());
    }
  }
  return names;
}

// The first line where `a` and `b` differ, both versions, for the failure message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t line = 1, start = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) {
      auto line_of = [&](const std::string& s) {
        return s.substr(start, std::min<std::size_t>(s.find('\n', start) - start, 300));
      };
      return "line " + std::to_string(line) + ":\n  committed:   " + line_of(a) +
             "\n  regenerated: " + line_of(b);
    }
    if (a[i] == '\n') ++line, start = i + 1;
  }
  return "one is a prefix of the other (sizes " + std::to_string(a.size()) + " and " +
         std::to_string(b.size()) + ")";
}

void expect_example_current(const std::string& name, const std::string& arguments) {
  const fs::path committed = fs::path(SEXTANT_TEST_SOURCE_DIR) / "reports/examples" / name;
  testing::TempDir dir;
  const fs::path fresh = dir.path() / name;
  ASSERT_EQ(run_report(arguments, fresh.string()), 0) << "sextant " << arguments;
  const std::set<std::string> want = files_in(committed), got = files_in(fresh);
  ASSERT_FALSE(want.empty()) << committed << " is missing; " << kRefresh;
  EXPECT_EQ(want, got) << "the files of reports/examples/" << name << " differ; " << kRefresh;
  for (const std::string& f : want) {
    if (!got.count(f)) continue;
    const std::string a = testing::read_file((committed / f).string());
    const std::string b = testing::read_file((fresh / f).string());
    EXPECT_TRUE(a == b) << "reports/examples/" << name << "/" << f << " is stale, first change at "
                        << first_difference(a, b) << "\n" << kRefresh;
  }
}

TEST(ReportExamples, MegatronWeakScalingIsCurrent) {
  expect_example_current("megatron-weak-h100",
                         "report weak-scaling --spec configs/reports/megatron-weak-h100.yaml");
}

TEST(ReportExamples, Gpt3StrongScalingIsCurrent) {
  expect_example_current("gpt3-175b-strong-h100",
                         "report strong-scaling --spec configs/reports/gpt3-175b-strong-h100.yaml");
}

TEST(ReportExamples, Gpt3StrongScalingTp8Pp12IsCurrent) {
  expect_example_current(
      "gpt3-175b-strong-h100-tp8-pp12",
      "report strong-scaling --spec configs/reports/gpt3-175b-strong-h100-tp8-pp12.yaml");
}

TEST(ReportExamples, Narayanan21IsCurrent) {
  expect_example_current("narayanan21-a100",
                         "report weak-scaling --spec configs/reports/narayanan21-a100.yaml");
}

TEST(ReportExamples, CalibrationIsCurrent) {
  expect_example_current("calibration", "report calibration --runs tests/data/calibration");
}

}  // namespace
}  // namespace sextant::reports
