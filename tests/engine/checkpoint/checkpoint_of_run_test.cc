// A run and its checkpoints (engine/checkpoint/checkpoint_of_run.h,
// save_across_ranks.h), on the CPU: what the metadata records of the run
// (cp included: the world is tp·cp·dp·pp ranks), the check that a checkpoint
// fits, the save across ranks when one rank fails, and the load of a rank
// whose stage only the rank order tp-cp-dp-pp gives.
#include "engine/checkpoint/checkpoint_of_run.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <barrier>
#include <string>
#include <thread>

#include "engine/checkpoint/save_across_ranks.h"
#include "engine/model/parameter_layout.h"
#include "sim/comm/group_placement.h"
#include "sim/core/config_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::checkpoint {
namespace {

// A GPT of 2 layers, hidden 16, on `layout`.
RunDescription tiny_run(const sim::ParallelLayout& layout) {
  RunDescription r;
  r.model.name = "ckpt-run-gpt";
  r.model.num_layers = 2;
  r.model.hidden_size = 16;
  r.model.ffn_hidden_size = 64;
  r.model.num_attention_heads = 2;
  r.model.num_query_groups = 2;
  r.model.kv_channels = 8;
  r.model.vocab_size = 256;
  r.model.seq_length = 8;
  r.model.hidden_dropout = r.model.attention_dropout = 0;
  r.layout = layout;
  r.shape = transformer_shape_of(r.model, layout);
  r.lr = {3e-4, 3e-5, 1, 10};
  r.seed = 1234;
  r.steps = 10;
  return r;
}

sim::ParallelLayout layout_of(int tp, int cp, int dp, int zero) {
  sim::ParallelLayout l;
  l.tp = tp, l.cp = cp, l.dp = dp, l.zero = zero;
  l.mbs = 1;
  l.gbs = 8;
  return l;
}

RunSharding sharding_of_run(const RunDescription& r) {
  const ParameterLayout layout(r.shape);
  return {sharding_of(layout, r.layout.tp, layout.total_elements(), {}, r.layout.dp, false)};
}

// cp folds into dp: cp ranks hold the same weights and the distributed
// optimizer shards over dp x cp, so a cp x dp layout's arrays are those of
// dp·cp data-parallel ranks (the rank numbers unchanged: cp sits inside dp).
// (Before the engine ran cp, the checkpoint recorded cp with the cp ranks
// sharing one optimizer shard; ZeRO-1 over dp x cp made that wrong.)
TEST(CheckpointOfRun, LayoutFoldsCpIntoDpAndRecordsZeroWhereItShards) {
  EXPECT_EQ(checkpoint_layout_of(layout_of(2, 1, 1, 1)), (CheckpointLayout{2, 1, 0}));  // ZeRO-1 of one rank: nothing
  EXPECT_EQ(checkpoint_layout_of(layout_of(1, 1, 2, 1)), (CheckpointLayout{1, 2, 1}));
  EXPECT_EQ(checkpoint_layout_of(layout_of(1, 2, 2, 1)), (CheckpointLayout{1, 4, 1}));
  EXPECT_EQ(checkpoint_layout_of(layout_of(1, 2, 1, 1)), (CheckpointLayout{1, 2, 1}));  // ZeRO-1 over the 2 cp ranks
  EXPECT_EQ(checkpoint_layout_of(layout_of(2, 4, 1, 0)), (CheckpointLayout{2, 4, 0}));
  // Every rank keeps its number: rank_at of the folded layout is the run's.
  const sim::ParallelLayout run = layout_of(2, 2, 2, 1);
  const sim::ParallelLayout folded = rank_order_layout(checkpoint_layout_of(run));
  for (int r = 0; r < 8; ++r) {
    const sim::RankCoordinates c = sim::rank_coordinates(r, run);
    const sim::RankCoordinates f = sim::rank_coordinates(r, folded);
    EXPECT_EQ(f.tp, c.tp);
    EXPECT_EQ(f.dp, c.cp + run.cp * c.dp) << "rank " << r;
  }
}

TEST(CheckpointOfRun, MetadataCountsTheRanksOfEveryCpRank) {
  const RunDescription run = tiny_run(layout_of(2, 2, 2, 0));
  const CheckpointMetadata m = checkpoint_metadata_of(run, 3, 4, sharding_of_run(run));
  EXPECT_EQ(m.world_size, 2 * 2 * 2);  // tp·cp·dp
  EXPECT_EQ(m.layout.dp, 4);  // cp folded into dp
  EXPECT_EQ(m.layout.cp, 1);
  EXPECT_EQ(m.step, 3);
  EXPECT_EQ(m.data_batches, 4);
  EXPECT_EQ(m.model.seq_length, 8);  // the model's, not a cp rank's share of it
  // cp folds into dp, so no "cp" is written (the field is still read, 1 when absent).
  CheckpointMetadata with_files = m;
  for (int r = 0; r < m.world_size; ++r) with_files.files.push_back({r, shard_file_name(r), 1, 0});
  EXPECT_EQ(to_json(with_files).find("\"cp\""), std::string::npos);
  EXPECT_EQ(parse_metadata(to_json(with_files), "m.json").layout, m.layout);
  const RunDescription one = tiny_run(layout_of(1, 1, 1, 0));
  EXPECT_EQ(to_json(checkpoint_metadata_of(one, 1, 1, sharding_of_run(one))).find("\"cp\""), std::string::npos);
  EXPECT_THROW(checkpoint_metadata_of(run, 3, 4, {}), std::logic_error);
}

TEST(CheckpointOfRun, AnotherSeedAndNoStepsLeftAreNamed) {
  const RunDescription saved = tiny_run(layout_of(1, 1, 1, 0));
  const OpenedCheckpoint c{"ckpt/step-10", checkpoint_metadata_of(saved, 10, 10, sharding_of_run(saved))};
  EXPECT_NO_THROW(check_checkpoint_fits(c, [&] {
    RunDescription longer = saved;
    longer.steps = 20;
    return longer;
  }()));
  RunDescription other = saved;
  other.seed = 7;
  try {
    check_checkpoint_fits(c, other);
    ADD_FAILURE() << "another seed and no steps left were accepted";
  } catch (const sim::ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 2u);
    EXPECT_EQ(e.diagnostics()[0].file, "ckpt/step-10/metadata.json");
    EXPECT_EQ(e.diagnostics()[0].key, "--load");
    EXPECT_EQ(e.diagnostics()[0].message,
              "checkpoint's run used --seed 1234; this run has --seed 7 (the data order would not continue)");
    EXPECT_EQ(e.diagnostics()[1].message,
              "checkpoint is at step 10 (10 batches drawn); --steps 10 counts from the start of training, so "
              "nothing is left to run: give a larger --steps");
  }
}

// Two ranks in two threads: barrier(failed) says whether either failed this round.
class ThreadBarrier {
 public:
  bool operator()(int& round, bool failed) {
    if (failed) failed_[static_cast<std::size_t>(round)] = true;
    sync_.arrive_and_wait();
    return failed_[static_cast<std::size_t>(round++)];
  }

 private:
  std::barrier<> sync_{2};
  std::array<std::atomic<bool>, 3> failed_{};  // one per step of the save
};

TrainerState state_of(float value) {
  TrainerState s;
  s.steps_done = 3;
  s.weights_bf16 = {1, 2, 3};
  s.master = s.adam_m = s.adam_v = {value, value};
  return s;
}

TEST(SaveAcrossRanks, EveryRankWritesItsShardAndRankZeroCommits) {
  const sextant::testing::TempDir dir;
  const std::string root = dir.file("ckpt");
  CheckpointMetadata m;
  m.step = 3;
  m.world_size = 2;
  m.layout = {1, 2, 0};
  ThreadBarrier barrier;
  std::array<std::string, 2> folders;
  std::array<std::thread, 2> ranks;
  for (int r = 0; r < 2; ++r)
    ranks[static_cast<std::size_t>(r)] = std::thread([&, r] {
      int round = 0;
      folders[static_cast<std::size_t>(r)] = save_across_ranks(
          root, 1, r, m, state_of(static_cast<float>(r)), [&](bool failed) { return barrier(round, failed); });
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(folders[0], root + "/step-3");
  EXPECT_EQ(folders[1], folders[0]);
  const OpenedCheckpoint opened = open_checkpoint(root);
  EXPECT_EQ(read_rank_state(opened, 1), state_of(1));
}

TEST(SaveAcrossRanks, AFailingRankMakesEveryRankThrow) {
  const sextant::testing::TempDir dir;
  CheckpointMetadata m;
  m.step = 3;
  // Rank 1 whose peer failed: a ConfigError saying where to look, at the first barrier.
  int barriers = 0;
  try {
    save_across_ranks(dir.file("ckpt"), 1, 1, m, state_of(0), [&](bool failed) {
      ++barriers;
      return !failed;  // "another rank failed"
    });
    ADD_FAILURE() << "rank 1 went on";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(barriers, 1);
    EXPECT_EQ(e.diagnostics().at(0).key, "--save");
    EXPECT_EQ(e.diagnostics().at(0).message,
              "another rank could not write its part of checkpoint step-3 (its message is in its output)");
  }
  // Rank 0 that cannot create the folder (a file is in the way): its own error, after telling the others.
  sextant::testing::write_file(dir.file("taken"), "x");
  bool told = false;
  try {
    save_across_ranks(dir.file("taken"), 1, 0, m, state_of(0), [&](bool failed) {
      told = told || failed;
      return failed;
    });
    ADD_FAILURE() << "rank 0 saved into a file";
  } catch (const sim::ConfigError& e) {
    EXPECT_TRUE(told);
    EXPECT_EQ(e.diagnostics().at(0).message.find("another rank"), std::string::npos) << e.diagnostics().at(0).message;
  }
}

}  // namespace
}  // namespace sextant::engine::checkpoint
