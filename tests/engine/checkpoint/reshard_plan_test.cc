// Loading a checkpoint into another layout, on the CPU: the runs of a tensor
// a tp rank holds (QKV's heads, SwiGLU's gate and up, a row-parallel
// weight's columns), the ZeRO-1 shard ranges, and whole checkpoints moved
// between tp/dp/zero layouts through real files, every element checked.
//
// The end-to-end cases build each saved rank's arrays from the element's
// identity (identity_states.h: tensor i's whole element e holds 10000·i + e +
// 0.5 as its fp32 master), so a piece copied from the wrong rank, tensor or
// offset shows as a wrong number. Padding holds 7777 in the saved arrays and must be 0 after a
// reshard (it is not state).
#include <gtest/gtest.h>

#include <algorithm>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/checkpoint/reshard_plan.h"
#include "engine/model/parameter_layout.h"
#include "sim/core/config_error.h"
#include "tests/engine/checkpoint/identity_states.h"

namespace sextant::engine::checkpoint {
namespace {

namespace fs = std::filesystem;

TEST(ShardRuns, QkvRowsOfRankOneAreItsHeadsOfQKAndV) {
  // 4 query heads, 2 KV heads of dimension 2 over hidden 3: Q rows 0-7, K 8-11,
  // V 12-15. tp = 2, rank 1 holds Q rows 4-7, K rows 10-11, V rows 14-15 (the
  // test of tensor_parallel_trainer_test.cc's shard_of), 3 elements a row.
  const TensorSharding qkv{"qkv", 16, 3, 0, 0, {8, 4, 4}};
  const std::vector<ShardRun> want = {{0, 4 * 3, 4 * 3}, {12, 10 * 3, 2 * 3}, {18, 14 * 3, 2 * 3}};
  EXPECT_EQ(shard_runs(qkv, 2, 1), want);
  EXPECT_EQ(shard_runs(qkv, 1, 0), (std::vector<ShardRun>{{0, 0, 48}}));  // one rank: all, one run
}

TEST(ShardRuns, RowParallelWeightHoldsABlockOfColumnsOfEveryRow) {
  // fc2 (hidden 2, ffn 4): rank 1 of 2 holds columns 2-3 of rows 0 and 1.
  const TensorSharding fc2{"fc2", 2, 4, 0, 1, {4}};
  EXPECT_EQ(shard_runs(fc2, 2, 1), (std::vector<ShardRun>{{0, 2, 2}, {2, 6, 2}}));
  // SwiGLU's fc1 bias [gate 4 | up 4] at tp 2: rank 0 holds gate 0-1 and up 0-1 (whole 4-5).
  const TensorSharding bias{"fc1_bias", 1, 8, 0, 1, {4, 4}};
  EXPECT_EQ(shard_runs(bias, 2, 0), (std::vector<ShardRun>{{0, 0, 2}, {2, 4, 2}}));
  EXPECT_THROW(shard_runs(TensorSharding{"odd", 1, 6, 0, 1, {3, 3}}, 2, 0), std::invalid_argument);
}

TEST(CheckpointSharding, ZeroShardsAreEachRanksBlockOfEveryBucket) {
  TransformerShape s;
  s.num_layers = 1;
  s.hidden = 8;
  s.ffn_hidden = 16;
  s.heads = 2;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.vocab = 16;
  s.seq = 4;
  const ParameterLayout layout(s);
  // Buckets [0, 64) and [64, 192) over dp 2: rank 1 owns [32, +32) at 0 and [128, +64) at 32.
  const CheckpointSharding sh = sharding_of(layout, 2, 192, {{0, 64, 0}, {64, 128, 0}}, 2, true);
  ASSERT_EQ(sh.optimizer_shards.size(), 2u);
  EXPECT_EQ(sh.optimizer_shards[1], (std::vector<OptimizerRange>{{32, 32, 0}, {128, 64, 32}}));
  // The rank's qkv weight (24 x 8 per rank at tp 2) is 48 x 8 whole, in blocks Q 16, K 16, V 16.
  const auto found = std::find_if(sh.tensors.begin(), sh.tensors.end(),
                                  [](const TensorSharding& t) { return t.name == "layers.0.qkv_weight"; });
  ASSERT_NE(found, sh.tensors.end());
  const TensorSharding& qkv = *found;
  EXPECT_EQ(qkv.offset, layout.find("layers.0.qkv_weight").offset);
  EXPECT_EQ(qkv.rows, 48);
  EXPECT_EQ(qkv.cols, 8);
  EXPECT_EQ(qkv.blocks, (std::vector<std::int64_t>{16, 16, 16}));
  EXPECT_EQ(sh.tensors.at(0).split_dim, -1);  // wte replicated
}

// Beside expert parallelism (dp 4, ep 2) a dense bucket is cut in 4 blocks,
// an expert bucket in 2, one per rank of the expert-dp pair: dp rank 3 is ep
// rank 1's second member, so it owns the expert bucket's second half.
TEST(CheckpointSharding, ExpertBucketsAreShardedOverTheExpertDpGroup) {
  const std::vector<GradientBucketRange> buckets = {{0, 64, 0}, {64, 64, 0}};
  const auto shards = optimizer_shards_of(buckets, 4, 2, {false, true});
  ASSERT_EQ(shards.size(), 4u);
  EXPECT_EQ(shards[0], (std::vector<OptimizerRange>{{0, 16, 0}, {64, 32, 16, true}}));
  EXPECT_EQ(shards[1], (std::vector<OptimizerRange>{{16, 16, 0}, {64, 32, 16, true}}));
  EXPECT_EQ(shards[3], (std::vector<OptimizerRange>{{48, 16, 0}, {96, 32, 16, true}}));
  // ep = dp: each rank's experts are its own whole.
  EXPECT_EQ(optimizer_shards_of(buckets, 2, 2, {false, true})[1],
            (std::vector<OptimizerRange>{{32, 32, 0}, {64, 64, 32, true}}));
  EXPECT_THROW(optimizer_shards_of(buckets, 4, 2, {true}), std::logic_error);
}

// ---- whole checkpoints through files ----

struct Layout {
  int tp, dp, zero;
  int cp = 1;  // context-parallel ranks: the same arrays as cp rank 0's
  int ep = 1;  // expert-parallel ranks (the MoE model only), folded over dp
  CheckpointLayout checkpoint() const {
    CheckpointLayout c{tp, dp, zero};
    c.cp = cp;
    c.ep = ep;
    return c;
  }
};

// test_shape's Llama with its second layer's MLP 4 SwiGLU experts of width 8,
// top-2 (the first layer dense: DeepSeek's first_dense_layers), over `ep`
// ranks; with ZeRO-1 over `dp` > 1 ranks beside ep > 1 each kind's run of
// tensors aligned to 8·dp (as transformer_shape_of makes it).
TransformerShape moe_shape(int ep, int dp = 1, int zero = 0) {
  TransformerShape s;
  s.num_layers = 2;
  s.hidden = 16;
  s.ffn_hidden = 32;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.vocab = 24;
  s.seq = 8;
  s.experts = 4;
  s.local_experts = 4 / ep;
  s.ep = ep;
  s.router_topk = 2;
  s.expert_ffn_hidden = 8;
  s.first_dense_layers = 1;
  s.layernorm = s.bias = s.learned_positions = s.tie_embeddings = s.gelu = false;  // Llama's
  if (ep > 1 && zero != 0) s.expert_run_align_elements = 8 * static_cast<std::size_t>(dp);
  return s;
}

TransformerShape test_shape(int tp, bool llama, int hidden = 16) {
  TransformerShape s;
  s.num_layers = 2;
  s.hidden = hidden;
  s.ffn_hidden = 32 / tp;
  s.heads = 4 / tp;
  s.kv_heads = 2 / tp;  // GQA
  s.head_dim = 4;
  s.vocab = 24;
  s.seq = 8;
  s.layernorm = s.bias = s.learned_positions = s.tie_embeddings = s.gelu = !llama;
  return s;
}

// A run's sharding, with two ZeRO buckets that do not end at tensor boundaries.
CheckpointSharding sharding_for(const Layout& l, bool llama, int hidden = 16) {
  return testing::sharding_with_buckets(ParameterLayout(test_shape(l.tp, llama, hidden)), l.tp, l.dp, l.zero != 0);
}

// The MoE model's sharding under `l` (ZeRO-1 when it has zero: one bucket,
// cut where the tensors change kind when ep > 1, as the Trainer cuts it).
CheckpointSharding moe_sharding_for(const Layout& l) {
  const ParameterLayout layout(moe_shape(l.ep, l.dp, l.zero));
  const std::uint64_t multiple = 8 * static_cast<std::uint64_t>(l.dp);
  const std::uint64_t flat = l.zero != 0 ? (layout.total_elements() + multiple - 1) / multiple * multiple
                                         : layout.total_elements();
  std::vector<GradientBucketRange> buckets;
  if (l.zero != 0) {
    std::vector<ElementRange> ranges = {{0, flat}};
    if (l.ep > 1) ranges = split_at_expert_tensors(ranges, {layout}).ranges;
    for (const auto& [begin, end] : ranges) buckets.push_back({begin, end - begin, 0});
  }
  return sharding_of(layout, l.tp, flat, buckets, l.dp, l.zero != 0, l.ep);
}

// Every rank's state of a layout, each tensor identified by its index in the sharding.
std::vector<TrainerState> states_for(const Layout& l, const CheckpointSharding& sh, float pad, std::int64_t step) {
  const std::vector<CheckpointSharding> stages = {sh};
  const TensorSharding* first = stages.front().tensors.data();
  return testing::identity_states(
      l.tp, l.dp, stages, [&](const TensorSharding& t) { return static_cast<std::size_t>(&t - first); }, pad, step,
      l.cp, l.ep);
}

struct ReshardCase {
  Layout saved, run;
  bool llama;
};

class ReshardTest : public ::testing::TestWithParam<ReshardCase> {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sextant-reshard-" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Saves `l`'s states at step 5, each with `expert_biases`, and opens the checkpoint.
  OpenedCheckpoint save(const Layout& l, const CheckpointSharding& sh, const std::vector<float>& expert_biases = {}) {
    std::vector<TrainerState> states = states_for(l, sh, 7777.0f, 5);
    for (TrainerState& s : states) s.expert_biases = expert_biases;
    begin_save(root_.string(), 5);
    for (std::size_t w = 0; w < states.size(); ++w) write_rank_shard(root_.string(), 5, static_cast<int>(w), states[w]);
    CheckpointMetadata m;
    m.step = 5;
    m.data_batches = 5;
    m.layout = l.checkpoint();
    m.world_size = static_cast<int>(states.size());
    m.sharding = sh;
    commit_save(root_.string(), m, 1);
    return open_checkpoint(root_.string());
  }
  fs::path root_;
};

TEST_P(ReshardTest, EveryElementLandsWhereTheNewLayoutKeepsIt) {
  const ReshardCase& c = GetParam();
  const CheckpointSharding saved = sharding_for(c.saved, c.llama);
  const CheckpointSharding run = sharding_for(c.run, c.llama);
  const OpenedCheckpoint opened = save(c.saved, saved);
  ASSERT_EQ(opened.metadata.sharding, saved);  // through metadata.json
  testing::expect_resharded_states(opened, {opened.metadata.sharding}, c.run.checkpoint(), {run},
                                   states_for(c.run, run, 0.0f, 5));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ReshardTest,
    ::testing::Values(ReshardCase{{2, 1, 0}, {1, 1, 0}, false}, ReshardCase{{1, 1, 0}, {2, 1, 0}, false},
                      ReshardCase{{2, 1, 0}, {1, 1, 0}, true}, ReshardCase{{1, 1, 0}, {2, 1, 0}, true},
                      ReshardCase{{1, 2, 1}, {1, 1, 0}, false}, ReshardCase{{1, 1, 0}, {1, 2, 1}, false},
                      ReshardCase{{2, 2, 0}, {1, 4, 1}, true}, ReshardCase{{1, 4, 1}, {2, 2, 1}, false},
                      ReshardCase{{1, 2, 1}, {1, 4, 1}, true},
                      // Context parallelism: cp ranks hold the same arrays, and the ranks are
                      // numbered tp-cp-dp-pp. Saved dp rank 1 of cp = 2 is world rank 2, not 1
                      // (the optimizer shard read from rank tp·dp_rank = 1 would be dp rank 0's);
                      // loading rank 1 is cp rank 1 of dp rank 0, so it keeps dp rank 0's shard.
                      ReshardCase{{1, 2, 1, 2}, {1, 1, 0}, false}, ReshardCase{{1, 1, 0}, {1, 2, 1, 2}, false},
                      ReshardCase{{2, 2, 1, 2}, {1, 2, 1, 2}, true}, ReshardCase{{2, 2, 1, 2}, {2, 2, 1, 2}, false}),
    [](const ::testing::TestParamInfo<ReshardCase>& info) {
      const ReshardCase& c = info.param;
      auto text = [](const Layout& l) {
        return "Tp" + std::to_string(l.tp) + (l.cp > 1 ? "Cp" + std::to_string(l.cp) : "") + "Dp" +
               std::to_string(l.dp) + "Zero" + std::to_string(l.zero);
      };
      return text(c.saved) + "To" + text(c.run) + (c.llama ? "Llama" : "Gpt");
    });

// Expert parallelism: each ep rank (dp rank d: ep rank d mod ep) holds its
// experts' rows of the expert tensors, the rest as every dp rank. A checkpoint
// of one ep loads into another, and into and out of ep = 1 with and without ZeRO-1.
class ExpertReshardTest : public ReshardTest {};

TEST_P(ExpertReshardTest, EveryExpertRowLandsOnTheRankHoldingItsExpert) {
  const ReshardCase& c = GetParam();
  const CheckpointSharding saved = moe_sharding_for(c.saved);
  const CheckpointSharding run = moe_sharding_for(c.run);
  const OpenedCheckpoint opened = save(c.saved, saved);
  ASSERT_EQ(opened.metadata.sharding, saved);  // the expert flags and ep through metadata.json
  ASSERT_EQ(opened.metadata.layout.ep, c.saved.ep);
  testing::expect_resharded_states(opened, {opened.metadata.sharding}, c.run.checkpoint(), {run},
                                   states_for(c.run, run, 0.0f, 5));
}

// DeepSeek-V3's expert biases of the MoE layer (4 experts), the same on every
// saved rank, reach every loading rank whole, whatever its ep.
TEST_P(ExpertReshardTest, ExpertBiasesReachEveryRankWhole) {
  const ReshardCase& c = GetParam();
  const CheckpointSharding run = moe_sharding_for(c.run);
  const std::vector<float> biases = {0.25f, -0.5f, 0.0009765625f, -1.0f};
  const OpenedCheckpoint opened = save(c.saved, moe_sharding_for(c.saved), biases);
  std::vector<TrainerState> want = states_for(c.run, run, 0.0f, 5);
  for (TrainerState& s : want) s.expert_biases = biases;
  testing::expect_resharded_states(opened, {opened.metadata.sharding}, c.run.checkpoint(), {run}, want);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ExpertReshardTest,
    ::testing::Values(ReshardCase{{1, 4, 0, 1, 4}, {1, 2, 0, 1, 2}, true}, ReshardCase{{1, 2, 0, 1, 2}, {1, 1, 0}, true},
                      ReshardCase{{1, 1, 0}, {1, 4, 0, 1, 4}, true}, ReshardCase{{1, 4, 0, 1, 2}, {1, 4, 0, 1, 4}, true},
                      ReshardCase{{1, 2, 1}, {1, 4, 0, 1, 2}, true}, ReshardCase{{1, 4, 0, 1, 4}, {1, 2, 1}, true},
                      // ZeRO-1 beside ep: the experts' fp32 state sharded over the expert-dp
                      // group (dp 4, ep 2: pairs {0, 2} and {1, 3}; ep = dp: each rank's whole).
                      ReshardCase{{1, 4, 1, 1, 2}, {1, 1, 0}, true}, ReshardCase{{1, 1, 0}, {1, 4, 1, 1, 2}, true},
                      ReshardCase{{1, 4, 1, 1, 4}, {1, 2, 1, 1, 2}, true},
                      ReshardCase{{1, 2, 1, 1, 2}, {1, 4, 1, 1, 4}, true},
                      ReshardCase{{1, 4, 1, 1, 2}, {1, 4, 0, 1, 4}, true},
                      ReshardCase{{1, 4, 1, 1, 2}, {1, 2, 1}, true}),
    [](const ::testing::TestParamInfo<ReshardCase>& info) {
      const ReshardCase& c = info.param;
      auto text = [](const Layout& l) {
        return "Dp" + std::to_string(l.dp) + "Ep" + std::to_string(l.ep) + "Zero" + std::to_string(l.zero);
      };
      return text(c.saved) + "To" + text(c.run);
    });

TEST(ShardRuns, AnExpertTensorIsItsEpRanksRows) {
  const ParameterLayout layout(moe_shape(2));
  const CheckpointSharding sh = sharding_of(layout, 1, layout.total_elements(), {}, 2, false, 2);
  const auto found = std::find_if(sh.tensors.begin(), sh.tensors.end(),
                                  [](const TensorSharding& t) { return t.name == "layers.1.expert_fc1_weight"; });
  ASSERT_NE(found, sh.tensors.end());
  EXPECT_TRUE(found->expert);
  EXPECT_EQ(found->rows, 4 * 16);  // 4 experts x SwiGLU's 2 x 8 rows, all ranks'
  EXPECT_EQ(found->cols, 16);
  // ep rank 1 of 2: experts 2 and 3, rows [32, 64).
  EXPECT_EQ(shard_runs(*found, 1, 0, 2, 1), (std::vector<ShardRun>{{0, 32 * 16, 32 * 16}}));
  EXPECT_THROW(shard_runs(*found, 1, 0, 3, 0), std::invalid_argument);  // 64 rows over 3 ranks
}

std::string error_of(const CheckpointSharding& saved, const CheckpointSharding& run) {
  try {
    plan_reshard({2, 1, 0}, saved, {1, 1, 0}, run, 0, "m.json");
  } catch (const sim::ConfigError& e) {
    return e.diagnostics().at(0).file + ": " + e.diagnostics().at(0).message;
  }
  return "(no error)";
}

TEST(ReshardPlan, AnotherModelIsRefusedNamingTheTensor) {
  // A GPT checkpoint into a Llama run: SwiGLU's fc1 has twice the rows.
  EXPECT_EQ(error_of(sharding_for({2, 1, 0}, false), sharding_for({1, 1, 0}, true)),
            "m.json: tensor 'layers.0.fc1_weight' is 32 x 16 in the checkpoint; this run's is 64 x 16");
  EXPECT_EQ(error_of(sharding_for({2, 1, 0}, false), sharding_for({1, 1, 0}, false, 32)),
            "m.json: tensor 'wte' is 24 x 16 in the checkpoint; this run's is 24 x 32");
  CheckpointSharding fewer = sharding_for({2, 1, 0}, false);
  fewer.tensors.erase(fewer.tensors.begin() + 1);  // wpe (seq 8 x hidden 16)
  EXPECT_EQ(error_of(fewer, sharding_for({1, 1, 0}, false)),
            "m.json: has no tensor 'wpe' (this run's model has one of 8 x 16)");
  fewer = sharding_for({1, 1, 0}, false);
  fewer.tensors.pop_back();  // final_norm_beta
  EXPECT_EQ(error_of(sharding_for({2, 1, 0}, false), fewer),
            "m.json: has a tensor 'final_norm_beta' (1 x 16) that this run's model lacks");
}

// DeepSeek-V3's expert biases follow their MoE layer (the layer of a router
// tensor) between pipeline splits: layers 1 and 3 of 4 are MoE layers of 4
// experts, one on each of 2 saved stages (rows 0 of each); loaded at pp = 1
// they are rows 0 and 1, read from the first rank of their stage (world ranks
// 0 and 2 at tp 1, dp 2: rank = dp + 2 pp); back into pp 2, stage 1 reads row
// 1 of rank 0 of the whole-model save.
TEST(ReshardPlan, ExpertBiasesFollowTheirLayerToAnotherStage) {
  auto tensor = [](const std::string& name, std::uint64_t offset) { return TensorSharding{name, 4, 8, offset, -1, {}}; };
  CheckpointSharding stage0, stage1, whole;
  stage0.flat_elements = stage1.flat_elements = 64;
  stage0.tensors = {tensor("layers.0.qkv_weight", 0), tensor("layers.1.router_weight", 32)};
  stage0.chunks = {{0, 2, true, false}};
  stage1.tensors = {tensor("layers.2.qkv_weight", 0), tensor("layers.3.router_weight", 32)};
  stage1.chunks = {{2, 2, false, true}};
  whole.flat_elements = 128;
  whole.tensors = {tensor("layers.0.qkv_weight", 0), tensor("layers.1.router_weight", 32),
                   tensor("layers.2.qkv_weight", 64), tensor("layers.3.router_weight", 96)};
  CheckpointLayout two_stages{1, 2, 0};
  two_stages.pp = 2;
  const CheckpointLayout one_stage{1, 2, 0};
  const ReshardPlan merged = plan_reshard(two_stages, {stage0, stage1}, one_stage, whole, 1, "m.json");
  EXPECT_EQ(merged.bias_elements, 8u);
  EXPECT_EQ(merged.expert_biases, (std::vector<ArrayCopy>{{0, 0, 0, 4}, {2, 0, 4, 4}}));
  // World rank 3 of the pp-2 run: dp 1 of stage 1.
  const ReshardPlan split = plan_reshard(one_stage, {whole}, two_stages, stage1, 3, "m.json");
  EXPECT_EQ(split.bias_elements, 4u);
  EXPECT_EQ(split.expert_biases, (std::vector<ArrayCopy>{{0, 4, 0, 4}}));
}

// ZeRO-1's optimizer shards are one per dp rank (the cp ranks of a dp rank
// share one): metadata with another count is damaged, and said so.
TEST(ReshardPlan, OptimizerShardsMustBeOnePerDpRank) {
  const CheckpointSharding two_shards = sharding_for({1, 2, 1}, false);
  ASSERT_EQ(two_shards.optimizer_shards.size(), 2u);
  CheckpointLayout saved{1, 1, 1};  // dp = 1, with cp = 2 ranks that would share one shard
  saved.cp = 2;
  try {
    plan_reshard(saved, two_shards, {1, 1, 0}, sharding_for({1, 1, 0}, false), 0, "m.json");
    ADD_FAILURE() << "two optimizer shards for dp = 1 were planned";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message,
              "has 2 optimizer shards in a stage; its layout has dp=1 (damaged metadata?)");
  }
}

}  // namespace
}  // namespace sextant::engine::checkpoint
