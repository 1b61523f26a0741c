// Resuming from a checkpoint on the GPU: a tiny GPT trained N steps without a
// break, against the same run saved at step N/2 (through the real files:
// engine/checkpoint/checkpoint_directory.h) and resumed by a fresh trainer
// for steps N/2+1..N: the issue's "stop at step 50, resume, and steps 51-100
// equal an uninterrupted run" (N = 100: one rank, and pp = 2), and N = 6 for
// dp = 2 with the distributed optimizer, tp = 2, pp = 2 with vpp = 2, tp = 2,
// pp = 2, dp = 2, and the distributed optimizer beside tp = 2 (dp = 2) and
// beside tp = 2, pp = 2 (dp = 2) (with pp > 1 the checkpoint metadata
// describes each stage, which the test checks against the
// trainer's own tensors), on the in-process communicator (each rank its own
// shard file). Skips without a GPU (fails instead under SEXTANT_REQUIRE_GPU=1).
//
// What must be equal bit for bit, and why:
// - The restored state: the four arrays and the step read back from the files
//   are the saved ones (state() after restore() == the state saved).
// - Step N/2+1's loss: the forward of the same weights and tokens runs the same
//   kernels (GEMM tuning off: cuBLASLt's heuristic choice depends on shapes
//   only), none of them with atomics.
// - The later steps and the final weights: bit for bit when the engine's backward is
//   itself reproducible, which the test measures by running the uninterrupted
//   run twice. Flash attention's backward adds dQ with fp32 atomics in any
//   order (data_parallel_trainer_test.cc), so two uninterrupted runs can
//   differ by ~1e-3 relative in a gradient; then the resumed run must be as
//   close to the first uninterrupted one as the second uninterrupted one is
//   (losses within 1e-4 relative, at most 1 % of the weights moved by more
//   than lr/10, the bounds of data_parallel_trainer_test.cc — or, over the 50
//   resumed steps where that noise can grow, within twice the second run's
//   own distance from the first), and the printout says which case held.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/comm/communicator.h"
#include "engine/checkpoint/checkpoint_sharding.h"
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

constexpr std::size_t kBucketElements = 10'000;

TrainerOptions resume_options(int steps) {
  TrainerOptions o = testing::three_step_options();
  o.lr.warmup_steps = 2;
  o.lr.decay_steps = steps;  // the schedule runs past the save: the resumed steps use their own rates
  o.bucket_elements = kBucketElements;
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
  int pp = 1, vpp = 1;
  int steps = 6;  // saved after steps / 2
  const char* name = "";
  int ranks() const { return dp * tp * pp; }
  int save_at() const { return steps / 2; }
};

// Calls body(rank, trainer) on the tp·dp·pp ranks of `c` (in-process threads
// when more than one; groups split in the order tp-dp-pp), each with a fresh
// trainer.
template <typename Body>
void on_ranks(const ResumeCase& c, const sim::ModelConfig& model, const sim::ParallelLayout& layout,
              const TrainerOptions& options, Body body) {
  if (c.ranks() == 1) {
    Trainer trainer(model, layout, options);
    body(0, trainer);
    return;
  }
  comm::testing::run_in_process(c.ranks(), [&](int r, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
    Trainer trainer(model, layout, options, groups);
    body(r, trainer);
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

checkpoint::CheckpointMetadata metadata_of(const ResumeCase& c, const sim::ModelConfig& model,
                                           const sim::ParallelLayout& layout) {
  checkpoint::CheckpointMetadata m;
  m.step = c.save_at();
  m.data_batches = c.save_at();
  m.layout = {c.tp, c.dp, c.distributed_optimizer ? 1 : 0, c.pp, c.vpp};
  m.world_size = c.ranks();
  if (c.pp > 1) m.stages = checkpoint::pipeline_sharding(model, layout, kBucketElements);
  return m;
}

// A pipeline stage's description in the metadata names the trainer's tensors in
// its order and its flat arrays' length (the CPU's pipeline_stage_sharding
// against the trainer's own chunks); nothing to check at pp = 1 (the metadata
// describes no stage).
void expect_stage_described(const Trainer& trainer, const checkpoint::CheckpointMetadata& m, int rank) {
  if (trainer.parallel_layout().pp == 1) return;
  const checkpoint::CheckpointSharding& described = checkpoint::stage_sharding(m, trainer.stage());
  std::vector<std::string> names;
  for (const checkpoint::TensorSharding& t : described.tensors) names.push_back(t.name);
  EXPECT_EQ(names, trainer.tensor_names()) << "rank " << rank << " (stage " << trainer.stage() << ")";
  EXPECT_EQ(described.flat_elements, trainer.state().weights_bf16.size()) << "rank " << rank;
  // With the distributed optimizer, each dp rank's shard: its block of each of the trainer's buckets.
  if (!described.optimizer_shards.empty()) {
    EXPECT_EQ(described.optimizer_shards,
              checkpoint::optimizer_shards_of(trainer.gradient_buckets(), m.layout.dp)) << "rank " << rank;
  }
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
  const int world = param.ranks();
  const int steps = param.steps, save_at = param.save_at(), resumed_steps = steps - save_at;
  sim::ModelConfig model = testing::small_model("ckpt-gpt", false, 2, 2);
  if (param.pp > 1) model.num_layers = 4;  // a layer per virtual stage at pp = 2, vpp = 2
  sim::ParallelLayout layout;
  layout.tp = param.tp;
  layout.dp = param.dp;
  layout.pp = param.pp;
  layout.vpp = param.vpp;
  if (param.vpp > 1) layout.schedule = sim::Schedule::kInterleaved;
  layout.zero = param.distributed_optimizer ? 1 : 0;
  layout.mbs = 1;
  layout.gbs = 4;
  if (param.pp > 1) {
    ASSERT_EQ(sim::check_pipeline_split(model, layout), sim::SplitProblem::kNone);
  }
  const TransformerShape shape = transformer_shape_of(model, layout);  // the rank's shard under tp
  ASSERT_TRUE(transformer_shape_problems(shape, model).empty());
  TrainerOptions options = resume_options(steps);
  options.seed = rng()();
  std::vector<Batch> batches;
  for (int i = 0; i < steps; ++i) batches.push_back(testing::random_batch(rng(), 4, shape.seq, shape.vocab));
  const checkpoint::CheckpointMetadata metadata = metadata_of(param, model, layout);
  const fs::path root = fs::temp_directory_path() / ("sextant-resume-" + std::to_string(::getpid()) + "-" + param.name);
  fs::remove_all(root);

  // Twice without a break; the first saves after step N/2.
  std::vector<RankRun> first(static_cast<std::size_t>(world)), second(static_cast<std::size_t>(world));
  checkpoint::begin_save(root.string(), save_at);
  on_ranks(param, model, layout, options, [&](int r, auto& trainer) {
    expect_stage_described(trainer, metadata, r);
    train(trainer, batches, 1, steps, first[static_cast<std::size_t>(r)], root.string(), save_at, r);
  });
  checkpoint::commit_save(root.string(), metadata, 2);
  on_ranks(param, model, layout, options, [&](int r, auto& trainer) {
    train(trainer, batches, 1, steps, second[static_cast<std::size_t>(r)], "", 0, r);
  });

  // A fresh trainer per rank from the files, steps N/2+1..N.
  const checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(root.string());
  ASSERT_EQ(opened.metadata.step, save_at);
  ASSERT_EQ(opened.metadata.stages, metadata.stages);  // through metadata.json (version 3 with pp > 1)
  std::vector<RankRun> resumed(static_cast<std::size_t>(world));
  on_ranks(param, model, layout, options, [&](int r, auto& trainer) {
    const checkpoint::TrainerState saved = checkpoint::read_rank_state(opened, r);
    trainer.restore(saved);
    EXPECT_TRUE(trainer.state() == saved) << "rank " << r << ": the state read back differs from the one saved";
    EXPECT_EQ(trainer.steps_done(), save_at);
    train(trainer, batches, save_at + 1, steps, resumed[static_cast<std::size_t>(r)], "", 0, r);
  });
  fs::remove_all(root);

  const double lr = options.lr.max_lr;
  for (int r = 0; r < world; ++r) {
    const RankRun& a = first[static_cast<std::size_t>(r)];
    const RankRun& b = second[static_cast<std::size_t>(r)];
    const RankRun& c = resumed[static_cast<std::size_t>(r)];
    ASSERT_EQ(c.losses.size(), static_cast<std::size_t>(resumed_steps));
    EXPECT_EQ(c.losses[0], a.losses[static_cast<std::size_t>(save_at)]) << "rank " << r << ": step " << save_at + 1 << "'s loss";
    const bool reproducible = a.losses == b.losses && a.final_state == b.final_state;
    if (reproducible) {
      for (int s = 1; s < resumed_steps; ++s)
        EXPECT_EQ(c.losses[static_cast<std::size_t>(s)], a.losses[static_cast<std::size_t>(save_at + s)])
            << "rank " << r << ": step " << save_at + 1 + s;
      EXPECT_TRUE(c.final_state == a.final_state) << "rank " << r << ": final state differs";
    } else {
      for (int s = 1; s < resumed_steps; ++s) {
        const std::size_t i = static_cast<std::size_t>(save_at + s);
        const double noise = std::abs(b.losses[i] - a.losses[i]);
        EXPECT_NEAR(c.losses[static_cast<std::size_t>(s)], a.losses[i], std::max(1e-4 * a.losses[i], 2 * noise))
            << "rank " << r << ": step " << save_at + 1 + s;
      }
      EXPECT_EQ(c.final_state.steps_done, a.final_state.steps_done);
      EXPECT_LE(static_cast<double>(moved_weights(c.final_state, a.final_state, lr)),
                std::max(1e-2 * static_cast<double>(a.final_state.weights_bf16.size()),
                         2.0 * static_cast<double>(moved_weights(b.final_state, a.final_state, lr))));
    }
    const std::size_t last = static_cast<std::size_t>(steps - 1);
    std::cout << "  tp=" << param.tp << " dp=" << param.dp << (param.distributed_optimizer ? " zero=1" : "")
              << (param.pp > 1 ? " pp=" + std::to_string(param.pp) : "")
              << (param.vpp > 1 ? " vpp=" + std::to_string(param.vpp) : "") << " rank " << r << ": saved at step "
              << save_at << "; losses of steps " << save_at + 1 << " and " << steps << " uninterrupted "
              << a.losses[static_cast<std::size_t>(save_at)] << ", " << a.losses[last] << "; resumed " << c.losses[0]
              << ", " << c.losses.back() << "; "
              << (reproducible ? "two uninterrupted runs agree bit for bit, and so does the resumed one: "
                               : "two uninterrupted runs differ (atomics), resumed compared within their noise: ")
              << (c.final_state == a.final_state ? "final state bit-identical" : "final state differs") << " ("
              << moved_weights(c.final_state, a.final_state, lr) << " of " << a.final_state.weights_bf16.size()
              << " weights moved by more than lr/10)\n";
  }
}

// The 50 + 50 steps on one rank and on a pipeline; 3 + 3 elsewhere.
INSTANTIATE_TEST_SUITE_P(Layouts, CheckpointResumeTest,
                         ::testing::Values(ResumeCase{1, 1, false, 1, 1, 100, "OneGpu"},
                                           ResumeCase{2, 1, true, 1, 1, 6, "Dp2DistributedOptimizer"},
                                           ResumeCase{1, 2, false, 1, 1, 6, "Tp2"},
                                           ResumeCase{1, 1, false, 2, 1, 100, "Pp2"},
                                           ResumeCase{1, 1, false, 2, 2, 6, "Pp2Vpp2"},
                                           ResumeCase{2, 2, false, 2, 1, 6, "Tp2Pp2Dp2"},
                                           ResumeCase{2, 2, true, 1, 1, 6, "Tp2Dp2DistributedOptimizer"},
                                           ResumeCase{2, 2, true, 2, 1, 6, "Tp2Pp2Dp2DistributedOptimizer"}),
                         [](const ::testing::TestParamInfo<ResumeCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sextant::engine
