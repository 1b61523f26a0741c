// Resuming from a checkpoint on the GPU: a tiny GPT trained 6 steps without a
// break, against the same run saved at step 3 (through the real files:
// engine/checkpoint/checkpoint_directory.h) and resumed by a fresh trainer
// for steps 4-6. One rank, dp = 2 with the distributed optimizer and tp = 2,
// on the in-process communicator (each rank its own shard file). Skips without a GPU
// (fails instead under SEXTANT_REQUIRE_GPU=1).
//
// What must be equal bit for bit, and why:
// - The restored state: the four arrays and the step read back from the files
//   are the saved ones (state() after restore() == the state saved).
// - Step 4's loss: the forward of the same weights and tokens runs the same
//   kernels (GEMM tuning off: cuBLASLt's heuristic choice depends on shapes
//   only), none of them with atomics.
// - Steps 5-6 and the final weights: bit for bit when the engine's backward is
//   itself reproducible, which the test measures by running the uninterrupted
//   run twice. Flash attention's backward adds dQ with fp32 atomics in any
//   order (data_parallel_trainer_test.cc), so two uninterrupted runs can
//   differ by ~1e-3 relative in a gradient; then the resumed run must be as
//   close to the first uninterrupted one as the second uninterrupted one is
//   (losses within 1e-4 relative, at most 1 % of the weights moved by more
//   than lr/10, the bounds of data_parallel_trainer_test.cc), and the printout
//   says which case held.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "kernels/bf16.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

namespace fs = std::filesystem;
using testing::Batch;

constexpr int kSteps = 6;
constexpr int kSaveAt = 3;

TrainerOptions resume_options(bool distributed_optimizer) {
  TrainerOptions o = testing::three_step_options(4);
  o.lr.warmup_steps = 2;
  o.lr.decay_steps = kSteps;  // the schedule runs past the save: steps 4-6 use their own rates
  o.bucket_elements = 10'000;
  o.distributed_optimizer = distributed_optimizer;
  return o;
}

struct RankRun {
  std::vector<double> losses;  // of the steps run
  checkpoint::TrainerState final_state;
};

struct ResumeCase {
  int dp;
  int tp;
  bool distributed_optimizer;
};

// Calls body(rank, dp group, tp group) on the tp·dp ranks of `c` (in-process
// threads when more than one; groups split in the order tp-dp; null: none).
template <typename Body>
void on_ranks(const ResumeCase& c, const sim::ParallelLayout& layout, Body body) {
  if (c.dp * c.tp == 1) {
    body(0, nullptr, nullptr);
    return;
  }
  comm::testing::run_in_process(c.dp * c.tp, [&](int r, comm::Communicator& world) {
    if (c.tp == 1) {
      body(r, &world, nullptr);
      return;
    }
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
    body(r, groups.dp.get(), groups.tp.get());
  });
}

// Steps [first, last] (1-based) on `batches`; saves rank states into `root` after step `save_at` (0: never).
void train(Trainer& trainer, const std::vector<Batch>& batches, int first, int last, RankRun& out,
           const std::string& root, int save_at, int rank) {
  for (int step = first; step <= last; ++step) {
    const Batch& b = batches[static_cast<std::size_t>(step - 1)];
    const StepResult r = trainer.step(b.inputs, b.targets);
    EXPECT_FALSE(r.skipped);
    out.losses.push_back(r.loss);
    if (step == save_at) checkpoint::write_rank_shard(root, step, rank, trainer.state());
  }
  out.final_state = trainer.state();
}

checkpoint::CheckpointMetadata metadata_of(const ResumeCase& c) {
  checkpoint::CheckpointMetadata m;
  m.step = kSaveAt;
  m.data_batches = kSaveAt;
  m.layout = {c.tp, c.dp, c.distributed_optimizer ? 1 : 0};
  m.world_size = c.tp * c.dp;
  return m;
}

std::size_t moved_weights(const checkpoint::TrainerState& a, const checkpoint::TrainerState& b, double lr) {
  std::size_t moved = 0;
  for (std::size_t i = 0; i < a.weights_bf16.size(); ++i) {
    const float x = kernels::to_float(kernels::Bf16{a.weights_bf16[i]});
    const float y = kernels::to_float(kernels::Bf16{b.weights_bf16[i]});
    moved += std::abs(x - y) > 0.1 * lr ? 1 : 0;
  }
  return moved;
}

class CheckpointResumeTest : public kernels::testing::GpuTestWithParam<ResumeCase> {};

TEST_P(CheckpointResumeTest, ResumedRunContinuesTheUninterruptedOne) {
  const ResumeCase& param = GetParam();
  const int world = param.dp * param.tp;
  const sim::ModelConfig model = testing::small_model("ckpt-gpt", false, 2, 2);
  sim::ParallelLayout layout;
  layout.tp = param.tp;
  layout.dp = param.dp;
  layout.mbs = 1;
  layout.gbs = 4;
  const TransformerShape shape = transformer_shape_of(model, layout);  // the rank's shard under tp
  ASSERT_TRUE(transformer_shape_problems(shape, model).empty());
  TrainerOptions options = resume_options(param.distributed_optimizer);
  options.seed = rng()();
  std::vector<Batch> batches;
  for (int i = 0; i < kSteps; ++i) batches.push_back(testing::random_batch(rng(), 4, shape.seq, shape.vocab));
  const fs::path root = fs::temp_directory_path() / ("sextant-resume-" + std::to_string(::getpid()) + "-" +
                                                     std::to_string(param.dp) + "-" + std::to_string(param.tp));
  fs::remove_all(root);

  // Twice without a break; the first saves at step 3.
  std::vector<RankRun> first(static_cast<std::size_t>(world)), second(static_cast<std::size_t>(world));
  checkpoint::begin_save(root.string(), kSaveAt);
  on_ranks(param, layout, [&](int r, comm::Communicator* dp, comm::Communicator* tp) {
    Trainer trainer(model, shape, options, dp, tp);
    train(trainer, batches, 1, kSteps, first[static_cast<std::size_t>(r)], root.string(), kSaveAt, r);
  });
  checkpoint::commit_save(root.string(), metadata_of(param), 2);
  on_ranks(param, layout, [&](int r, comm::Communicator* dp, comm::Communicator* tp) {
    Trainer trainer(model, shape, options, dp, tp);
    train(trainer, batches, 1, kSteps, second[static_cast<std::size_t>(r)], "", 0, r);
  });

  // A fresh trainer per rank from the files, steps 4-6.
  const checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(root.string());
  ASSERT_EQ(opened.metadata.step, kSaveAt);
  std::vector<RankRun> resumed(static_cast<std::size_t>(world));
  on_ranks(param, layout, [&](int r, comm::Communicator* dp, comm::Communicator* tp) {
    Trainer trainer(model, shape, options, dp, tp);
    const checkpoint::TrainerState saved = checkpoint::read_rank_state(opened, r);
    trainer.restore(saved);
    EXPECT_TRUE(trainer.state() == saved) << "rank " << r << ": the state read back differs from the one saved";
    EXPECT_EQ(trainer.steps_done(), kSaveAt);
    train(trainer, batches, kSaveAt + 1, kSteps, resumed[static_cast<std::size_t>(r)], "", 0, r);
  });
  fs::remove_all(root);

  const double lr = options.lr.max_lr;
  for (int r = 0; r < world; ++r) {
    const RankRun& a = first[static_cast<std::size_t>(r)];
    const RankRun& b = second[static_cast<std::size_t>(r)];
    const RankRun& c = resumed[static_cast<std::size_t>(r)];
    ASSERT_EQ(c.losses.size(), 3u);
    EXPECT_EQ(c.losses[0], a.losses[kSaveAt]) << "rank " << r << ": step 4's loss";
    const bool reproducible = a.losses == b.losses && a.final_state == b.final_state;
    if (reproducible) {
      for (int s = 1; s < 3; ++s) EXPECT_EQ(c.losses[static_cast<std::size_t>(s)], a.losses[static_cast<std::size_t>(kSaveAt + s)]);
      EXPECT_TRUE(c.final_state == a.final_state) << "rank " << r << ": final state differs";
    } else {
      for (int s = 1; s < 3; ++s)
        EXPECT_NEAR(c.losses[static_cast<std::size_t>(s)], a.losses[static_cast<std::size_t>(kSaveAt + s)],
                    1e-4 * a.losses[static_cast<std::size_t>(kSaveAt + s)]);
      EXPECT_EQ(c.final_state.steps_done, a.final_state.steps_done);
      EXPECT_LE(static_cast<double>(moved_weights(c.final_state, a.final_state, lr)),
                1e-2 * static_cast<double>(a.final_state.weights_bf16.size()));
    }
    std::cout << "  tp=" << param.tp << " dp=" << param.dp << (options.distributed_optimizer ? " zero=1" : "") << " rank " << r
              << ": losses 4-6 uninterrupted " << a.losses[3] << ", " << a.losses[4] << ", " << a.losses[5]
              << "; resumed " << c.losses[0] << ", " << c.losses[1] << ", " << c.losses[2] << "; "
              << (reproducible ? "two uninterrupted runs agree bit for bit, and so does the resumed one: "
                               : "two uninterrupted runs differ (atomics), resumed compared within their noise: ")
              << (c.final_state == a.final_state ? "final state bit-identical" : "final state differs") << " ("
              << moved_weights(c.final_state, a.final_state, lr) << " of " << a.final_state.weights_bf16.size()
              << " weights moved by more than lr/10)\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CheckpointResumeTest,
                         ::testing::Values(ResumeCase{1, 1, false}, ResumeCase{2, 1, true}, ResumeCase{1, 2, false}),
                         [](const ::testing::TestParamInfo<ResumeCase>& info) {
                           const ResumeCase& c = info.param;
                           if (c.tp > 1) return std::string("Tp2");
                           return c.dp == 1 ? std::string("OneGpu") : std::string("Dp2DistributedOptimizer");
                         });

}  // namespace
}  // namespace sextant::engine
