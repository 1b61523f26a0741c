// `sextant run`'s launch options through the binary (no GPU needed).
#include <gtest/gtest.h>

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
  // 2 ranks, cp=2 (dp = 2/2 = 1): a layout the engine does not execute yet is refused by
  // each rank before the rendezvous (so no GPU or NCCL is needed to say so).
  TempDir dir;
  CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout cp=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layout: cp: 2: `sextant run` trains data-, tensor- and pipeline-parallel layouts "
                       "(dp, tp, pp, vpp; MoE models with every expert on each GPU) so far; context "
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
        std::pair{"moe_a2a_overlap=1", "moe_a2a_overlap: 1: overlaps the expert-parallel all-to-all"}}) {
    const CommandResult r = run_sextant(dir, std::string("run --model gpt-350m --layout ") + layout);
    EXPECT_EQ(r.exit_code, 2) << layout;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace sextant::tools
