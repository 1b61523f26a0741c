// `sextant calibrate`'s input checks and its answer where it cannot measure:
// exit code 2 and one line naming the option, never a half-written profile.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;

TEST(CalibrateCommand, RefusesAnUnknownFormat) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "calibrate --out p.yaml --format xml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sextant: error: --format: 'xml': accepted: table, json\n");
}

TEST(CalibrateCommand, RefusesAFolderThatDoesNotExist) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "calibrate --out missing/p.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sextant: error: --out: 'missing/p.yaml': folder 'missing' does not exist\n");
}

TEST(CalibrateCommand, NeedsOut) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "calibrate --quick");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out is required"), std::string::npos) << r.err;
}

TEST(CalibrateCommand, WithoutAGpuSaysWhyAndWritesNothing) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "calibrate --out p.yaml --quick");
#ifdef SEXTANT_TEST_HAVE_ENGINE
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is present: calibrate ran";
  EXPECT_EQ(r.err, "sextant: error: sextant calibrate: no CUDA GPU found\n");
#else
  EXPECT_NE(r.err.find("calibrate needs the CUDA build"), std::string::npos) << r.err;
#endif
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.file("p.yaml")));
}

}  // namespace
}  // namespace sextant::tools
