// `sextant run`'s launch options through the binary (no GPU needed).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;

TEST(RunLaunch, PrintSbatchWritesTheSlurmScript) {
  TempDir dir;
  const CommandResult r = run_sextant(
      dir, "run --print-sbatch --nodes 4 --model llama3-70b --layout tp=8,pp=4 --steps 10");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/sextant run --model llama3-70b --layout tp=8,pp=4 --steps 10\n"),
            std::string::npos) << r.out;
}

// --print-sbatch writes nothing for a job `run` would refuse on its nodes x GPUs
// ranks (exit 2, one message naming the option), the same checks in the same words.
TEST(RunLaunch, PrintSbatchRefusesWhatRunRefusesBeforeWritingAnything) {
  TempDir dir;
  struct Case {
    const char* arguments;
    const char* message;
  };
  const Case cases[] = {
      // An unknown model.
      {"--model no-such-model", "no-such-model"},
      // 16 heads of gpt-350m over tp=3 (3 nodes of 1 GPU: the ranks fit, the heads do not).
      {"--nodes 3 --gpus-per-node 1 --model gpt-350m --layout tp=3",
       "--layout: tp: 3: num_attention_heads (16) of model 'gpt-350m' must be a multiple of tp"},
      // tp·pp = 64 ranks asked of 2 nodes of 8 GPUs.
      {"--nodes 2 --model gpt-350m --layout tp=8,pp=8",
       "--layout: tp·cp·pp = 64 does not divide the 16 ranks the launcher started"},
      // dp given, more than the nodes hold.
      {"--nodes 1 --model gpt-350m --layout dp=16",
       "tp·cp·dp·pp = 16 is not the 8 ranks the launcher started"},
      // A knob the engine does not execute.
      // (cp=2 before context parallelism was executed; etp is refused still.)
      {"--nodes 1 --model gpt-350m --layout etp=2", "expert tensor parallelism is not executed yet"},
      {"--nodes 1 --model gpt-350m --layout zero=3", "--layout: zero"},
      // A batch the ranks cannot share.
      {"--nodes 1 --model gpt-350m --layout mbs=2,gbs=6", "--layout"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_sextant(dir, std::string("run --print-sbatch ") + c.arguments);
    EXPECT_EQ(r.exit_code, 2) << c.arguments;
    EXPECT_EQ(r.out, "") << c.arguments;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.arguments << "\n" << r.err;
  }
}

TEST(RunLaunch, PrintSbatchAcceptsOnlySlurmTimeFormats) {
  TempDir dir;
  const std::string job = "run --print-sbatch --nodes 1 --model gpt-350m --steps 10 --time ";
  for (const char* time : {"99:99:99", "'01:00:00;reboot'", "'01:00:00\n#SBATCH --account=x'", "1h", "0"}) {
    const CommandResult r = run_sextant(dir, job + time);
    EXPECT_EQ(r.exit_code, 2) << time;
    EXPECT_EQ(r.out, "") << time;
    EXPECT_NE(r.err.find("--time: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("accepted: Slurm's forms minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"),
              std::string::npos) << r.err;
  }
  const CommandResult r = run_sextant(dir, job + "1-12:00");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#SBATCH --time=1-12:00\n"), std::string::npos) << r.out;
}

TEST(RunLaunch, PrintSbatchQuotesOrRefusesEveryValueThatReachesTheScript) {
  TempDir dir;
  // A ';' in a value is quoted on the srun line, never run.
  CommandResult r = run_sextant(dir, "run --print-sbatch --nodes 1 --model gpt-350m --steps 10 --save 'ck;pt'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" --save 'ck;pt'\n"), std::string::npos) << r.out;
  // A newline is refused (shown escaped).
  r = run_sextant(dir, "run --print-sbatch --nodes 1 --model gpt-350m --steps 10 --save 'ck\n#SBATCH --x'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("'ck\\n#SBATCH --x' holds a control character"), std::string::npos) << r.err;
  // Node and GPU counts: whole numbers in range.
  r = run_sextant(dir, "run --print-sbatch --nodes 0 --model gpt-350m");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nodes: expected a whole number from 1 to"), std::string::npos) << r.err;
  r = run_sextant(dir, "run --print-sbatch --gpus-per-node 1000 --model gpt-350m");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--gpus-per-node: expected a whole number from 1 to 64, got '1000'"), std::string::npos)
      << r.err;
}

TEST(RunLaunch, ALayoutThatDoesNotFitTheRanksStopsEveryRank) {
  // 2 ranks, tp=3: each rank refuses the layout (exit 2); the supervisor exits 2 with the message.
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout tp=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sextant: error: --layout: tp·cp·pp = 3 does not divide the 2 ranks the "
                       "launcher started"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sextant run: rank "), std::string::npos) << r.err;
}

TEST(RunLaunch, ModelParallelLayoutsStopEveryRankBeforeTheyMeet) {
  // 2 ranks, etp=2 (cp=2 before context parallelism was executed): a layout the engine
  // does not execute yet is refused by each rank before the rendezvous (so no GPU or
  // NCCL is needed to say so).
  TempDir dir;
  CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout etp=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layout: etp: 2: `sextant run` trains data-, tensor-, context- and pipeline-parallel "
                       "layouts (dp, tp, cp, pp, vpp; ep for MoE models) so far; expert tensor "
                       "parallelism is not executed yet"),
            std::string::npos) << r.err;
  // pp=2 with vpp=2: gpt-350m's 24 layers split into 4 chunks of 6, but one
  // micro-batch per replica is not a multiple of pp.
  r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout pp=2,vpp=2,mbs=1,gbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layout: gbs: interleaved 1F1B needs the micro-batches per replica (gbs/(mbs·dp) = 1) "
                       "to be a multiple of pp (2)"),
            std::string::npos) << r.err;
  // tp splits heads: gpt-350m's 16 heads do not split over 3 ranks.
  r = run_sextant(dir, "run --nproc-per-node 3 --model gpt-350m --layout tp=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layout: tp: 3: num_attention_heads (16) of model 'gpt-350m' must be a multiple of tp"),
            std::string::npos) << r.err;
}

TEST(RunLaunch, ADataParallelBatchTheRanksCannotShareIsRefused) {
  // dp = 2 ranks, mbs 2: a global batch of 6 is 3 micro-batches, not 2 per rank.
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout mbs=2,gbs=6");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("gbs: 6 is not a multiple of mbs·dp = 2·2 (each data-parallel rank runs "
                       "gbs / (mbs·dp) micro-batches)"),
            std::string::npos) << r.err;
}

TEST(RunLaunch, ZeroStagesBeyondTheDistributedOptimizerAreRefused) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout dp=2,zero=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("zero: 2: the engine executes zero=0 and zero=1 (dist_opt=1, the distributed "
                       "optimizer) so far"),
            std::string::npos) << r.err;
}

TEST(RunLaunch, OverlapGradReduceOffIsRefusedWhereTheEngineOverlaps) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout dp=2,overlap_grad_reduce=0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("overlap_grad_reduce: 0: with data parallelism the engine always reduces each gradient bucket"),
            std::string::npos) << r.err;
}

TEST(RunLaunch, OverlapParamGatherNeedsTheDistributedOptimizerOverDataParallelRanks) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout dp=2,overlap_param_gather=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("overlap_param_gather: 1: overlaps the distributed optimizer's all-gather of the weights with "
                       "the next forward, so it needs zero=1 (dist_opt=1) and dp > 1 (this layout has zero=0, dp=2)"),
            std::string::npos) << r.err;
}

TEST(RunLaunch, KnobsTheEngineDoesNotExecuteAreRefusedNotIgnored) {
  TempDir dir;
  for (const auto& [layout, message] :
       {std::pair{"grad_reduce_in_fp32=0", "grad_reduce_in_fp32: 0: the engine reduces gradients in fp32; accepted: 1"},
        std::pair{"moe_a2a_overlap=1", "moe_a2a_overlap: 1: the engine runs the expert-parallel all-to-all and "
                                       "the shared expert without overlapping them"}}) {
    const CommandResult r = run_sextant(dir, std::string("run --model gpt-350m --layout ") + layout);
    EXPECT_EQ(r.exit_code, 2) << layout;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// Without a GPU every rank path says so as plain `run` does (exit 2), never a
// CUDA error from cudaSetDevice (exit 1): the ranks --nproc-per-node starts,
// and a rank started by Slurm, by Open MPI or by torchrun-style variables.
TEST(RunLaunch, RanksWithoutAGpuSaySoAndExitTwo) {
  if (std::getenv("SEXTANT_REQUIRE_GPU") != nullptr) GTEST_SKIP() << "a GPU is expected here";
  TempDir dir;
  const std::string job = "run --model gpt-350m --seq-length 128 --layout mbs=1 --steps 1";
  auto expect_refused = [](const CommandResult& r, const std::string& path) {
    EXPECT_EQ(r.exit_code, 2) << path << "\n" << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << path << "\n" << r.err;
    const bool explained = r.err.find("no CUDA GPU is visible") != std::string::npos ||
                           r.err.find("built without") != std::string::npos;
    EXPECT_TRUE(explained) << path << "\n" << r.err;
  };
  // What each rank says: a sextant without the engine (the sanitizer build has
  // no CUDA, so no NCCL either) says what it was built without instead.
  // Of several ranks, whichever reaches its GPU check first says so; the
  // supervisor then stops the others, perhaps before they print.
#ifdef SEXTANT_TEST_HAVE_ENGINE
  const std::vector<std::string> several_ranks = {"rank 0: no CUDA GPU is visible", "rank 1: no CUDA GPU is visible"};
  const std::string one_rank = "rank 0: no CUDA GPU is visible";
#else
  const std::vector<std::string> several_ranks = {"built without NCCL"};
  const std::string one_rank = "built without the CUDA toolkit";
#endif
  const CommandResult local = run_sextant(dir, "run --nproc-per-node 2 " + job.substr(4));
  if (local.exit_code == 0) GTEST_SKIP() << "this machine has GPUs";
  expect_refused(local, "--nproc-per-node 2");
  EXPECT_TRUE(std::any_of(several_ranks.begin(), several_ranks.end(),
                          [&](const std::string& m) { return local.err.find(m) != std::string::npos; }))
      << local.err;
  // One rank of a job of one, as each launcher describes it (a world of one
  // needs no peer to meet, so the rank reaches its GPU check alone).
  const std::vector<std::vector<std::pair<const char*, const char*>>> launchers = {
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_NODELIST", "localhost"}},
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
       {"MASTER_ADDR", "127.0.0.1"}},
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}},
  };
  for (const auto& variables : launchers) {
    for (const auto& [name, value] : variables) ::setenv(name, value, 1);
    const CommandResult r = run_sextant(dir, job);
    for (const auto& [name, value] : variables) ::unsetenv(name);
    expect_refused(r, variables.front().first);
    EXPECT_NE(r.err.find(one_rank), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace sextant::tools
