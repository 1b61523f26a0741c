// The training loop (engine/training/training_loop.h) on one GPU: what it
// records, when it saves, and that every rank leaves it after the same step
// when one rank asks to stop (two dp ranks on the in-process communicator).
// Skips without a GPU (fails instead under SEXTANT_REQUIRE_GPU=1).
#include "engine/training/training_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "engine/comm/parallel_groups.h"
#include "engine/data/token_batches.h"
#include "engine/trainer.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/small_models.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::training {
namespace {

class TrainingLoopTest : public kernels::testing::GpuTest {};

sim::ParallelLayout layout_of(int dp, int gbs) {
  sim::ParallelLayout l;
  l.dp = dp;
  l.mbs = 1;
  l.gbs = gbs;
  return l;
}

TEST_F(TrainingLoopTest, RecordsEveryStepTimesAfterTheWarmupAndSavesWhenDue) {
  const sim::ModelConfig model = engine::testing::small_model("loop-gpt", false, 2, 2);
  const sim::ParallelLayout layout = layout_of(1, 2);
  const comm::ParallelGroups one_gpu;
  Trainer trainer(model, layout, engine::testing::three_step_options(), one_gpu);
  data::SyntheticTokens data(static_cast<int>(model.vocab_size), static_cast<int>(model.seq_length), 7);
  StopVote vote(one_gpu, std::chrono::seconds(10));
  LoopSettings settings;
  settings.tokens_per_step = 2 * static_cast<std::size_t>(model.seq_length);
  settings.steps = 7;
  settings.untimed_steps = 3;
  settings.save_interval = 2;
  std::vector<int> saved, logged;
  LoopHooks hooks;
  hooks.save = [&](int batches) { saved.push_back(batches); };
  hooks.after_step = [&](const StepResult& r, int steps_so_far, std::size_t peak) {
    logged.push_back(steps_so_far);
    EXPECT_EQ(r.step, steps_so_far);
    EXPECT_GT(peak, 0u);
  };
  const TrainingRecord record = train(trainer, data, vote, settings, hooks);
  EXPECT_EQ(record.steps(), 7);
  EXPECT_EQ(record.batches_drawn, 7);
  EXPECT_EQ(record.step_seconds.size(), 4u);  // steps 4..7
  EXPECT_EQ(logged, (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(saved, (std::vector<int>{2, 4, 6}));  // the last step's save is the caller's
  EXPECT_FALSE(record.interrupted);
  EXPECT_FALSE(record.nonfinite.has_value());
  // Uniform random tokens over 160: the first loss is near ln(160) = 5.075.
  EXPECT_NEAR(record.losses.front(), std::log(160.0), 0.3);
  EXPECT_GT(record.median_step_s(), 0);
}

TEST_F(TrainingLoopTest, OneRanksStopEndsEveryRankAfterTheSameStep) {
  const sim::ModelConfig model = engine::testing::small_model("loop-dp", false, 2, 2);
  const sim::ParallelLayout layout = layout_of(2, 4);
  std::vector<int> steps(2, -1);
  std::vector<bool> interrupted(2, false);
  comm::testing::run_in_process(2, [&](int rank, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
    Trainer trainer(model, layout, engine::testing::three_step_options(), groups);
    data::SyntheticTokens data(static_cast<int>(model.vocab_size), static_cast<int>(model.seq_length), 7);
    StopVote vote(groups, std::chrono::seconds(30));
    LoopSettings settings;
    settings.tokens_per_step = 4 * static_cast<std::size_t>(model.seq_length);
    settings.steps = 10;
    int asked = 0;
    LoopHooks hooks;
    // Rank 1 asks before its fourth step: both ranks train three.
    hooks.stop_requested = [&] { return rank == 1 && ++asked == 4; };
    const TrainingRecord record = train(trainer, data, vote, settings, hooks);
    steps[static_cast<std::size_t>(rank)] = record.steps();
    interrupted[static_cast<std::size_t>(rank)] = record.interrupted;
  });
  EXPECT_EQ(steps, (std::vector<int>{3, 3}));
  EXPECT_EQ(interrupted, (std::vector<bool>{true, true}));
}

}  // namespace
}  // namespace sextant::engine::training
