// Every saved fuzz input -- the seed corpora and the crashes the fuzzers found
// (tests/fuzz/regressions/) -- through the same code the fuzz targets run, so
// normal CI keeps them fixed without clang or libFuzzer. Each input must load
// or be rejected with a ConfigError; see tests/fuzz/fuzz_inputs.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_inputs.h"

namespace sextant::sim {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(SEXTANT_TEST_SOURCE_DIR) / "tests" / "fuzz";

// Inputs of tests/fuzz/regressions/ that still crash because their bug in sim/
// is not fixed yet; DISABLED_KnownCrashesNoLongerCrash runs them. Remove a name
// here when its bug is fixed.
const std::set<std::string> kKnownCrashes = {
};

// The files of `folder` (sorted, so failures are reproducible), `known` ones apart.
std::vector<fs::path> inputs(const fs::path& folder, bool known) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (!entry.is_regular_file()) continue;
    if ((kKnownCrashes.count(entry.path().filename().string()) > 0) == known) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void run_yaml_inputs(const fs::path& folder, bool known) {
  for (const fs::path& path : inputs(folder, known)) {
    SCOPED_TRACE(path.string());
    EXPECT_EQ(fuzz::run_yaml_input(contents(path)), "");
  }
}

void run_layout_inputs(const fs::path& folder, bool known) {
  static const fuzz::LayoutCheckFixture fixture;
  for (const fs::path& path : inputs(folder, known)) {
    SCOPED_TRACE(path.string());
    const std::string spec = contents(path);
    EXPECT_EQ(fuzz::run_layout_input(spec), "");
    EXPECT_EQ(fuzz::run_layout_check_input(spec, fixture), "");
  }
}

TEST(FuzzRegression, SeedCorporaAreNotEmpty) {
  EXPECT_GE(inputs(kFuzzDir / "corpus" / "model", false).size(), 3u) << kFuzzDir;
  EXPECT_GE(inputs(kFuzzDir / "corpus" / "layout", false).size(), 3u) << kFuzzDir;
}

TEST(FuzzRegression, YamlSeedCorpus) { run_yaml_inputs(kFuzzDir / "corpus" / "model", false); }

TEST(FuzzRegression, LayoutSeedCorpus) { run_layout_inputs(kFuzzDir / "corpus" / "layout", false); }

TEST(FuzzRegression, YamlRegressions) {
  run_yaml_inputs(kFuzzDir / "regressions" / "model", false);
}

TEST(FuzzRegression, LayoutRegressions) {
  run_layout_inputs(kFuzzDir / "regressions" / "layout", false);
}

TEST(FuzzRegression, DISABLED_KnownCrashesNoLongerCrash) {
  run_yaml_inputs(kFuzzDir / "regressions" / "model", true);
  run_layout_inputs(kFuzzDir / "regressions" / "layout", true);
}

}  // namespace
}  // namespace sextant::sim
