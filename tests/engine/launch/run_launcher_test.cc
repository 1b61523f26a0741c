#include "engine/launch/run_launcher.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

EnvironmentLookup no_launcher() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

TEST(RunLauncher, ChildrenRunTheCommandWithoutTheLaunchOptions) {
  EXPECT_EQ(without_launch_options({"sextant", "run", "--nproc-per-node", "4", "--model", "m",
                                    "--print-sbatch", "--nodes=2", "--gpus-per-node", "8",
                                    "--time", "1:00:00", "--steps", "3"}),
            (std::vector<std::string>{"sextant", "run", "--model", "m", "--steps", "3"}));
}

TEST(RunLauncher, DpFillsTheWorld) {
  // 8 ranks with tp=2, pp=2: dp = 8 / (2·2) = 2.
  const sim::ParallelLayout l = layout_for_world(sim::parse_layout("tp=2,pp=2,mbs=2"), 8);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.total_gpus(), 8);
  EXPECT_EQ(l.gbs, 4);  // mbs · dp when gbs is left out
  try {
    layout_for_world(sim::parse_layout("tp=3"), 2);
    FAIL() << "accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).to_string(),
              "--layout: tp·cp·pp = 3 does not divide the 2 ranks the launcher started");
  }
  EXPECT_THROW(layout_for_world(sim::parse_layout("tp=2,dp=2"), 8), sim::ConfigError);
  // Megatron's dp with ep: all the data-parallel ranks, which ep folds over (the message says so).
  try {
    layout_for_world(sim::parse_layout("ep=2,dp=2,zero=1"), 4);
    FAIL() << "accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(e.diagnostics().at(0).to_string().find("dp=4 gives ep=2 groups of expert-dp 2"), std::string::npos)
        << e.diagnostics().at(0).to_string();
  }
  EXPECT_EQ(layout_for_world(sim::parse_layout("ep=2,zero=1"), 4).dp, 4);
}

TEST(RunLauncher, PrintsTheSbatchScriptInsteadOfRunning) {
  LaunchOptions o;
  o.print_sbatch = true;
  o.nodes = 2;
  std::ostringstream out, log;
  const auto code = launch_or_continue(o, no_launcher(), {"./sextant", "run", "--print-sbatch", "--nodes", "2", "--model", "m"},
                                       "/opt/bin/sextant", out, log);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.str().find("#SBATCH --nodes=2\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nsrun --kill-on-bad-exit=1 /opt/bin/sextant run --model m\n"),
            std::string::npos) << out.str();
}

TEST(RunLauncher, SupervisesLocalRanksAndReturnsTheFailure) {
  // The "binary" is a shell whose rank 1 fails with code 5.
  LaunchOptions o;
  o.nproc_per_node = 2;
  std::ostringstream out, log;
  const auto code = launch_or_continue(
      o, no_launcher(), {"x", "-c", "[ \"$RANK\" = 1 ] && exit 5; exit 0", "--nproc-per-node", "2"},
      "/bin/sh", out, log);
  EXPECT_EQ(code, 5);
  EXPECT_NE(log.str().find("sextant run: rank 1 exited with code 5; stopping the other ranks"),
            std::string::npos) << log.str();
}

TEST(RunLauncher, TrainsWhenNoLaunchOptionIsGiven) {
  std::ostringstream out, log;
  EXPECT_FALSE(launch_or_continue({}, no_launcher(), {"sextant", "run"}, "sextant", out, log));
}

}  // namespace
}  // namespace sextant::engine::launch
