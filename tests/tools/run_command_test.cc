// `sextant run`'s input checks, which need no GPU: bad input exits 2 with a
// message naming the option and the accepted values.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/checkpoint/checkpoint_directory.h"
#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;

TEST(RunCommand, RefusesParallelLayoutsByName) {
  TempDir dir;
  // etp: the knob left refused since cp is executed (this asserted cp's refusal before).
  CommandResult r = run_sextant(dir, "run --model gpt-350m --layout etp=2,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("etp: 2: `sextant run` trains data-, tensor-, context- and pipeline-parallel layouts (dp, "
                       "tp, cp, pp, vpp; ep for MoE models) so far; expert tensor parallelism is not "
                       "executed yet, so etp must be 1"),
            std::string::npos) << r.err;
  // cp=2 on one process: the ranks are refused, not context parallelism.
  r = run_sextant(dir, "run --model gpt-350m --layout cp=2,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cp: 2: this run has 1 rank(s), not a multiple of tp·cp = 2"), std::string::npos) << r.err;
  // pp=2 needs two processes; vpp needs a pipeline.
  r = run_sextant(dir, "run --model gpt-350m --layout pp=2,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pp: 2: this run has 1 rank(s), not a multiple of tp·pp = 2: start tp·pp·dp processes"),
            std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --layout vpp=2,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("vpp: 2: model chunks interleave over a pipeline; needs pp > 1"), std::string::npos) << r.err;
  // tp=2 needs two processes, with or without sequence parallelism (which is
  // accepted: the complaint is the rank count, not sp).
  for (const char* layout : {"tp=2,mbs=1", "tp=2,sp=1,mbs=1"}) {
    r = run_sextant(dir, std::string("run --model gpt-350m --layout ") + layout);
    EXPECT_EQ(r.exit_code, 2) << layout;
    EXPECT_NE(r.err.find("tp: 2: this run has 1 rank(s), not a multiple of tp: start tp·dp processes"),
              std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("sp:"), std::string::npos) << r.err;
  }
}

// tp_comm_overlap overlaps sequence parallelism's collectives with the GEMMs:
// refused by name without tp > 1 and sp=1; with them the complaint is the
// rank count (one process here), not the knob.
TEST(RunCommand, TpCommOverlapNeedsSequenceParallelism) {
  TempDir dir;
  CommandResult r = run_sextant(dir, "run --model gpt-350m --layout tp_comm_overlap=1,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tp_comm_overlap: 1: overlaps the sequence-parallel all-gather and reduce-scatter with the "
                       "GEMMs, so it needs tp > 1 and sp=1 (this layout has tp=1, sp=0)"),
            std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --layout tp=2,sp=1,tp_comm_overlap=1,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tp: 2: this run has 1 rank(s), not a multiple of tp"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("tp_comm_overlap:"), std::string::npos) << r.err;
}

TEST(RunCommand, DataParallelNeedsThatManyProcesses) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --model gpt-350m --layout dp=2,mbs=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("dp: tp·dp = 2 but this run has 1 rank(s): start tp·dp processes with "
                       "--nproc-per-node 2"),
            std::string::npos) << r.err;
}

// A checkpoint is checked against the run before any GPU is touched: one
// saved at tp=2 by a version-1 sextant (no sharding in its metadata) cannot be
// loaded at tp=1, nor one of another pp; a missing one is named.
TEST(RunCommand, RefusesACheckpointOfAnotherLayout) {
  TempDir dir;
  const std::string root = dir.file("ckpt");
  engine::checkpoint::CheckpointMetadata m;
  m.step = 3;
  m.data_batches = 3;
  m.seed = 1234;  // run's default
  m.layout = {2, 1, 0};
  m.world_size = 1;
  m.format_version = 1;
  engine::checkpoint::begin_save(root, 3);
  engine::checkpoint::write_rank_shard(root, 3, 0, engine::checkpoint::TrainerState{3, {}, {}, {}, {}});
  engine::checkpoint::commit_save(root, m, 2);
  CommandResult r = run_sextant(dir, "run --model gpt-350m --layout mbs=2,gbs=8 --steps 10 --load ckpt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ckpt/step-3/metadata.json: --load: checkpoint has tp=2, dp=1, zero=0; this run has tp=1, "
                       "dp=1, zero=0: its metadata (format version 1) does not say where its tensors lie, and this "
                       "sextant lays them out in another order; load it with the sextant that wrote it"),
            std::string::npos) << r.err;
  // The model's fields (the metadata above holds zeros) are named too.
  EXPECT_NE(r.err.find("checkpoint is of model '' (num_layers 0, hidden_size 0"), std::string::npos) << r.err;
  // Version 3, saved with tp = 2 and pp = 2 (each stage described): the layout
  // is no refusal (another pp reshards by tensor name); the model still is.
  m.layout.pp = 2;
  m.world_size = 4;
  engine::checkpoint::CheckpointSharding stage;
  stage.flat_elements = 64;
  stage.tensors = {{"wte", 1, 64, 0, -1, {}}};
  stage.chunks = {{0, 12, true, false}};
  m.stages = {stage, stage};
  m.stages[1].chunks = {{12, 12, false, true}};
  engine::checkpoint::begin_save(root, 4);
  m.step = 4;
  for (int rank = 0; rank < 4; ++rank)
    engine::checkpoint::write_rank_shard(root, 4, rank, engine::checkpoint::TrainerState{4, {}, {}, {}, {}});
  engine::checkpoint::commit_save(root, m, 2);
  r = run_sextant(dir, "run --model gpt-350m --layout mbs=2,gbs=8 --steps 10 --load ckpt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("checkpoint has tp=2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ckpt/step-4/metadata.json: --load: checkpoint is of model '' (num_layers 0, hidden_size 0"),
            std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --layout mbs=2,gbs=8 --load nowhere");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nowhere: --load: no such checkpoint folder"), std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --layout mbs=2,gbs=8 --save-interval 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--save-interval: 5: needs --save DIR"), std::string::npos) << r.err;
}

// A version-2 checkpoint (its sharding described) of gpt-350m saved at tp=2
// fits a tp=1 run: the layout is no refusal (the run then stops only for want
// of a GPU here); the same with hidden_size 2048 is refused naming that field
// alone (parameters_per_rank, which depends on tp, is not compared).
TEST(RunCommand, LoadsACheckpointOfAnotherTpButNotOfAnotherModel) {
  if (std::getenv("SEXTANT_REQUIRE_GPU") != nullptr) GTEST_SKIP() << "a GPU is expected here: it would train";
  TempDir dir;
  const std::string root = dir.file("ckpt");
  engine::checkpoint::CheckpointMetadata m;
  m.step = 3;
  m.data_batches = 3;
  m.seed = 1234;
  m.model = {"gpt-350m", 24, 1024, 4096, 16, 16, 64, 51200, 128, 1};  // kv_channels 1024 / 16
  m.layout = {2, 1, 0};
  m.world_size = 2;
  m.lr_schedule = {3e-4, 3e-5, 1, 10};
  m.sharding.flat_elements = 64;
  m.sharding.tensors = {{"wte", 51200, 1024, 0, -1, {}}};
  auto save = [&](std::int64_t step) {
    m.step = step;
    engine::checkpoint::begin_save(root, step);
    for (int r = 0; r < 2; ++r)
      engine::checkpoint::write_rank_shard(root, step, r, engine::checkpoint::TrainerState{step, {}, {}, {}, {}});
    engine::checkpoint::commit_save(root, m, 2);
  };
  save(3);
  const std::string run = "run --model gpt-350m --seq-length 128 --layout mbs=1,gbs=1 --steps 10 --lr 3e-4 "
                          "--min-lr 3e-5 --warmup-steps 1 --lr-decay-steps 10 --load ckpt";
  CommandResult r = run_sextant(dir, run);
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("--load"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("no CUDA GPU is visible") != std::string::npos ||
              r.err.find("built without the CUDA toolkit") != std::string::npos)
      << r.err;
  m.model.hidden_size = 2048;
  save(4);
  r = run_sextant(dir, run);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ckpt/step-4/metadata.json: --load: checkpoint is of model 'gpt-350m' (hidden_size 2048); "
                       "this run's is 'gpt-350m' (hidden_size 1024)"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("tp=2"), std::string::npos) << r.err;  // the layout is not what is wrong
}

// A version-3 checkpoint of gpt-350m saved with pp = 2 (each stage described)
// fits a pp = 1 run: another pp is resharded on load, so the run stops only
// for want of a GPU here.
TEST(RunCommand, LoadsACheckpointOfAnotherPp) {
  if (std::getenv("SEXTANT_REQUIRE_GPU") != nullptr) GTEST_SKIP() << "a GPU is expected here: it would train";
  TempDir dir;
  const std::string root = dir.file("ckpt");
  engine::checkpoint::CheckpointMetadata m;
  m.step = 3;
  m.data_batches = 3;
  m.seed = 1234;
  // parameters_per_rank: ParameterLayout's count of the whole model at seq 128 (tp = 1), which
  // pp does not change (the stages' files hold it between them).
  m.model = {"gpt-350m", 24, 1024, 4096, 16, 16, 64, 51200, 128, 354871296};
  m.layout = {1, 1, 0, 2};
  m.world_size = 2;
  m.lr_schedule = {3e-4, 3e-5, 1, 10};
  engine::checkpoint::CheckpointSharding stage;
  stage.flat_elements = 64;
  stage.tensors = {{"wte", 51200, 1024, 0, -1, {}}};
  stage.chunks = {{0, 12, true, false}};
  m.stages = {stage, stage};
  m.stages[1].chunks = {{12, 12, false, true}};
  engine::checkpoint::begin_save(root, 3);
  for (int r = 0; r < 2; ++r)
    engine::checkpoint::write_rank_shard(root, 3, r, engine::checkpoint::TrainerState{3, {}, {}, {}, {}});
  engine::checkpoint::commit_save(root, m, 2);
  const CommandResult r = run_sextant(dir, "run --model gpt-350m --seq-length 128 --layout mbs=1,gbs=1 --steps 10 "
                                           "--lr 3e-4 --min-lr 3e-5 --warmup-steps 1 --lr-decay-steps 10 --load ckpt");
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("--load"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("no CUDA GPU is visible") != std::string::npos ||
              r.err.find("built without the CUDA toolkit") != std::string::npos)
      << r.err;
}

TEST(RunCommand, RefusesAGlobalBatchThatIsNotAMultipleOfTheMicroBatch) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --model gpt-350m --layout mbs=3,gbs=8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("8 is not a multiple of mbs=3"), std::string::npos) << r.err;
}

TEST(RunCommand, RefusesModelsTheKernelsCannotRun) {
  TempDir dir;
  sextant::testing::write_file(dir.file("odd.yaml"),
                               "name: odd\nnum_layers: 2\nhidden_size: 96\nffn_hidden_size: 384\n"
                               "num_attention_heads: 1\nkv_channels: 136\nvocab_size: 1000\nseq_length: 64\n"
                               "activation: gelu\nnormalization: layernorm\ntie_embeddings: true\n");
  const CommandResult r = run_sextant(dir, "run --model odd.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("head dimension (kv_channels) 136: the attention kernels take multiples of 8 up to 128"),
            std::string::npos) << r.err;
}

TEST(RunCommand, RefusesAMissingDatasetAndABadFormat) {
  TempDir dir;
  CommandResult r = run_sextant(dir, "run --model gpt-350m --data absent/corpus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("absent/corpus"), std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --format yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("accepted: table, json"), std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --on-nonfinite ignore");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--on-nonfinite: 'ignore': accepted: stop, skip"), std::string::npos) << r.err;
  r = run_sextant(dir, "run --model gpt-350m --comm-timeout-s 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--comm-timeout-s"), std::string::npos) << r.err;
}

// DeepSeek-V3's expert bias (--moe-router-enable-expert-bias) runs on the
// sigmoid router of an MoE model and is refused, each with one message and exit
// code 2, everywhere else: with softmax scores, on a dense model, at rate 0, and
// its rate without it.
TEST(RunCommand, ExpertBiasNeedsTheSigmoidRouterOfAnMoeModel) {
  TempDir dir;
  const std::string moe = "run --model moe-mixtral-tiny --steps 1 --layout mbs=1,gbs=1 ";
  CommandResult r = run_sextant(dir, moe + "--moe-router-enable-expert-bias");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--moe-router-enable-expert-bias: DeepSeek-V3's expert bias needs "
                       "--moe-router-score-function sigmoid (the router is softmax)"),
            std::string::npos) << r.err;
  r = run_sextant(dir, moe + "--moe-router-score-function tanh");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--moe-router-score-function: 'tanh': accepted: softmax, sigmoid"), std::string::npos) << r.err;
  r = run_sextant(dir, moe + "--moe-router-bias-update-rate 0.01");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--moe-router-bias-update-rate requires --moe-router-enable-expert-bias"), std::string::npos)
      << r.err;
  const std::string sigmoid = "--moe-router-score-function sigmoid --moe-router-enable-expert-bias";
  r = run_sextant(dir, "run --model gpt-350m --steps 1 --layout mbs=1,gbs=1 " + sigmoid);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--moe-router-enable-expert-bias: model gpt-350m has no MoE layers (no router to bias)"),
            std::string::npos) << r.err;
  r = run_sextant(dir, moe + sigmoid + " --moe-router-bias-update-rate 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--moe-router-bias-update-rate: 0: the biases would never move"), std::string::npos) << r.err;
  // --help teaches it: what it does, its source, what it needs.
  r = run_sextant(dir, "run --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* taught : {"--moe-router-enable-expert-bias", "arXiv:2412.19437", "--moe-router-bias-update-rate",
                             "checkpoints keep them", "--moe-router-score-function"})
    EXPECT_NE(r.out.find(taught), std::string::npos) << taught;
  // The sigmoid router with the bias passes every check (here it then stops for want of a GPU).
  if (std::getenv("SEXTANT_REQUIRE_GPU") != nullptr) return;  // it would train
  r = run_sextant(dir, moe + sigmoid + " --moe-router-bias-update-rate 0.002");
  if (r.exit_code == 0) return;  // this machine has a GPU
  EXPECT_EQ(r.err.find("moe-router"), std::string::npos) << r.err;
}

TEST(RunCommand, WithoutAGpuSaysSoAndExitsTwo) {
  // On machines with a GPU this test has nothing to check.
  if (std::getenv("SEXTANT_REQUIRE_GPU") != nullptr) GTEST_SKIP() << "a GPU is expected here";
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --model gpt-350m --steps 1 --layout mbs=1,gbs=1");
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const bool explained = r.err.find("no CUDA GPU is visible") != std::string::npos ||
                         r.err.find("built without the CUDA toolkit") != std::string::npos;
  EXPECT_TRUE(explained) << r.err;
}

}  // namespace
}  // namespace sextant::tools

namespace sextant::tools {
namespace {

TEST(RunCommand, LayoutBestIsTheSearchsFirstChoiceForOneGpu) {
  TempDir dir;
  const std::string profile =
      std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";
  // With the fixture profile, micro-batch 16 (the largest that divides 64 and
  // fits in 80 GiB without recomputation: the engine's arena count predicts 75.6
  // GiB against the 76 GiB limit after 5 % headroom, and an H200 measured a peak of
  // 75.61 GiB, reports/measurements/2026-11-28-h200x4-hopper-d64-backward/call2/
  // gpt13b_mbs16.json) is fastest: fewer, larger kernels.
  const CommandResult r = run_sextant(
      dir, "run --model gpt-1.3b --layout best --global-batch 64 --steps 1 --profile " + profile);
  EXPECT_NE(r.out.find("layout best: tp=1,pp=1,vpp=1,dp=1,cp=1,ep=1,etp=1,mbs=16,gbs=64,sp=0,recompute=none,zero=0,"),
            std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("(the search's first of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test-engine-measured"), std::string::npos) << r.out;
  const CommandResult missing = run_sextant(dir, "run --model gpt-1.3b --layout best");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--layout: best: needs the global batch: give --global-batch N"),
            std::string::npos) << missing.err;
  const CommandResult two = run_sextant(dir, "run --model gpt-1.3b --gpus 2");
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("--gpus: 2: `sextant run` trains on one GPU so far; accepted: 1"),
            std::string::npos) << two.err;
}

}  // namespace
}  // namespace sextant::tools
