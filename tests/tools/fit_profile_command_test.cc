// `sextant fit-profile` as a user runs it: a folder of `run --compare --format
// json` outputs in, the profile with its fit: block out.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/core/config_loader.h"
#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;

// One run's JSON as `run --compare --format json` prints it (the fit reads "compare").
std::string run_json(const char* model, int mbs, int gbs, const char* recompute, double measured_s) {
  return std::string("{\"step_time_s\": 1, \"compare\": {\"model\": \"") + model +
         "\", \"layout\": {\"mbs\": " + std::to_string(mbs) + ", \"gbs\": " + std::to_string(gbs) +
         ", \"recompute\": \"" + recompute + "\"}, \"seq_length\": 2048, \"device\": \"NVIDIA H100 80GB HBM3\", "
         "\"predicted_step_time_s\": 0.1, \"measured_step_time_s\": " + std::to_string(measured_s) + "}}\n";
}

TEST(FitProfileCommand, WritesTheFittedProfileAndItsTable) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("runs"));
  sextant::testing::write_file(dir.file("runs/a.json"), run_json("gpt-350m", 1, 8, "none", 0.150));
  sextant::testing::write_file(dir.file("runs/b.json"), run_json("gpt-350m", 8, 8, "none", 0.097));
  sextant::testing::write_file(dir.file("runs/c.json"), run_json("gpt-1.3b", 4, 4, "full", 0.170));
  sextant::testing::write_file(dir.file("runs/d.json"), run_json("gpt-1.3b", 4, 8, "selective", 0.250));
  const std::string profile = std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";
  const CommandResult r = run_sextant(dir, "fit-profile --runs runs --profile " + profile + " --out fitted.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fit of test-engine-measured (sextant-engine) on 4 runs of runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpt-1.3b     mbs=4,gbs=8,recompute=selective"), std::string::npos) << r.out;
  const sim::CostProfile fitted = sim::load_profile_file(dir.file("fitted.yaml"));
  ASSERT_TRUE(fitted.fit);
  EXPECT_EQ(fitted.fit->runs, 4);
  EXPECT_EQ(fitted.fit->data_set, "runs (4 engine runs on NVIDIA H100 80GB HBM3, `sextant run --compare`)");
  EXPECT_GT(fitted.fit->parameter("compute_time_factor", 0), 0.5);
  ASSERT_TRUE(fitted.tables);  // the measured tables are kept
  EXPECT_EQ(fitted.tables->linear_bf16.size(), 75u);
}

TEST(FitProfileCommand, SaysWhatIsWrongWithItsInput) {
  TempDir dir;
  const std::string profile = std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";
  CommandResult r = run_sextant(dir, "fit-profile --runs absent --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sextant: error: --runs: 'absent' is not a folder\n");
  std::filesystem::create_directories(dir.file("runs"));
  sextant::testing::write_file(dir.file("runs/a.json"), run_json("gpt-350m", 1, 8, "none", 0.150));
  r = run_sextant(dir, "fit-profile --runs runs --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--runs: 1 run(s) found; the fit needs at least 3"), std::string::npos) << r.err;
  sextant::testing::write_file(dir.file("runs/b.json"), "{\"model\": \"gpt-350m\"}\n");
  r = run_sextant(dir, "fit-profile --runs runs --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("runs/b.json: layout: missing; is this the output of `sextant run --compare --format json`?"),
            std::string::npos) << r.err;
}

// A run over several GPUs (its layout's spec, as `run --compare` writes it
// since the engine runs parallel layouts) is refused by name, not fitted as if
// it were one GPU's.
TEST(FitProfileCommand, RefusesARunOverSeveralGpus) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("runs"));
  for (const char* name : {"a", "b", "c"})
    sextant::testing::write_file(dir.file(std::string("runs/") + name + ".json"),
                                 run_json("gpt-350m", 2, 8, "none", 0.150));
  sextant::testing::write_file(
      dir.file("runs/d.json"),
      "{\"compare\": {\"model\": \"gpt-1.3b\", \"layout\": {\"mbs\": 2, \"gbs\": 64, \"recompute\": \"none\", "
      "\"spec\": \"tp=2,pp=2,vpp=1,dp=1,mbs=2,gbs=64\"}, \"seq_length\": 2048, \"predicted_step_time_s\": 1, "
      "\"measured_step_time_s\": 1.2}}\n");
  const std::string profile = std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";
  const CommandResult r = run_sextant(dir, "fit-profile --runs runs --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("runs/d.json: layout: tp=2,pp=2,mbs=2,gbs=64,recompute=none trained on 4 GPUs; "
                       "fit-profile fits one-GPU runs"),
            std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("f.yaml")));
}

// The profile, the cluster and the runs must be one GPU, as simulate requires
// of a profile and its cluster: H200 runs fitted against the default
// dgx-h100 are refused, naming the cluster that has the GPU, and nothing is written.
TEST(FitProfileCommand, RefusesAProfileOrRunsOfAnotherGpuThanTheClusters) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("runs"));
  sextant::testing::write_file(dir.file("runs/a.json"), run_json("gpt-350m", 1, 8, "none", 0.150));
  sextant::testing::write_file(dir.file("runs/b.json"), run_json("gpt-350m", 8, 8, "none", 0.097));
  std::string h200 = run_json("gpt-1.3b", 4, 4, "full", 0.170);
  h200.replace(h200.find("NVIDIA H100 80GB HBM3"), std::string("NVIDIA H100 80GB HBM3").size(), "NVIDIA H200");
  sextant::testing::write_file(dir.file("runs/c.json"), h200);
  const std::string profile = std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";
  CommandResult r = run_sextant(dir, "fit-profile --runs runs --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "sextant: error: runs/c.json: device: trained on NVIDIA H200 (h200-sxm-141gb) but --cluster "
                   "dgx-h100 has GPU h100-sxm-80gb; give --cluster dgx-h200 (its GPU is h200-sxm-141gb), or leave "
                   "this run out of --runs\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("f.yaml")));
  // The H100 profile and runs against an H200 cluster: both the profile and the H100 runs are named.
  std::filesystem::remove(dir.file("runs/c.json"));
  sextant::testing::write_file(dir.file("runs/c.json"), run_json("gpt-1.3b", 4, 4, "full", 0.170));
  r = run_sextant(dir, "fit-profile --cluster dgx-h200 --runs runs --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sextant: error: --cluster: 'dgx-h200' has GPU h200-sxm-141gb but --profile " + profile +
                       " is for h100-sxm-80gb; give --cluster dgx-h100 (its GPU is h100-sxm-80gb)\n"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sextant: error: runs/a.json: device: trained on NVIDIA H100 80GB HBM3 (h100-sxm-80gb) but "
                       "--cluster dgx-h200 has GPU h200-sxm-141gb; give --cluster dgx-h100"),
            std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("f.yaml")));
  // The same runs with the profile's cluster fit.
  r = run_sextant(dir, "fit-profile --cluster dgx-h100 --runs runs --profile " + profile + " --out f.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace sextant::tools
