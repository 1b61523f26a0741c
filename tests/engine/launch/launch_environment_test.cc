#include "engine/launch/launch_environment.h"

#include <gtest/gtest.h>

#include <map>

#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

EnvironmentLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LaunchEnvironment, NoLauncherMeansOneProcess) {
  EXPECT_FALSE(rank_environment(env_of({{"HOME", "/root"}})).has_value());
}

TEST(LaunchEnvironment, TorchrunStyleVariables) {
  const auto e = rank_environment(env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"},
                                          {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "6000"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "env");
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 3);
  EXPECT_EQ(e->master_addr, "10.0.0.1");
  EXPECT_EQ(e->master_port, 6000);
}

TEST(LaunchEnvironment, SlurmTakesTheFirstHostOfTheStep) {
  const auto e = rank_environment(env_of({{"SLURM_PROCID", "13"}, {"SLURM_NTASKS", "32"},
                                          {"SLURM_LOCALID", "5"},
                                          {"SLURM_JOB_NODELIST", "big[001-100]"},
                                          {"SLURM_STEP_NODELIST", "dgx[07-10]"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "slurm");
  EXPECT_EQ(e->rank, 13);
  EXPECT_EQ(e->world_size, 32);
  EXPECT_EQ(e->local_rank, 5);
  EXPECT_EQ(e->master_addr, "dgx07");
  EXPECT_EQ(e->master_port, kDefaultMasterPort);
}

TEST(LaunchEnvironment, SlurmJobListWhenNoStepListAndMasterOverrides) {
  const auto job = rank_environment(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                            {"SLURM_JOB_NODELIST", "a[2-3]"}}));
  EXPECT_EQ(job->master_addr, "a2");
  const auto forced = rank_environment(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                               {"SLURM_JOB_NODELIST", "a[2-3]"},
                                               {"MASTER_ADDR", "b"}, {"MASTER_PORT", "7"}}));
  EXPECT_EQ(forced->master_addr, "b");
  EXPECT_EQ(forced->master_port, 7);
}

TEST(LaunchEnvironment, OpenMpiOnOneNodeUsesThisHost) {
  const auto e = rank_environment(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "openmpi");
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->master_addr, "127.0.0.1");
}

TEST(LaunchEnvironment, OpenMpiOnSeveralNodesNeedsMasterAddr) {
  try {
    rank_environment(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "16"},
                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}));
    FAIL() << "accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).file, "MASTER_ADDR");
  }
}

TEST(LaunchEnvironment, BadNumbersNameTheVariable) {
  auto message = [](std::map<std::string, std::string> vars) {
    try {
      rank_environment(env_of(std::move(vars)));
    } catch (const sim::ConfigError& e) {
      return e.diagnostics().at(0).to_string();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
            "RANK: 'x' is not an integer");
  EXPECT_EQ(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
            "RANK: 2 is not below WORLD_SIZE = 2");
  EXPECT_EQ(message({{"RANK", "0"}}), "WORLD_SIZE: is not set (the launcher sets it beside the others)");
  EXPECT_EQ(message({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}}),
            "MASTER_PORT: 70000 is not a TCP port (1 to 65535)");
}

}  // namespace
}  // namespace sextant::engine::launch
