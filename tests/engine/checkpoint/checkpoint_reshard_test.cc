// Loading a checkpoint into another layout on the GPU: a tiny model trained 3
// steps in one layout and saved (real files), loaded by fresh trainers of
// another layout (tp = 2 -> 1, 1 -> 2, dp = 2 with ZeRO-1 -> 1, 1 -> dp = 2
// with ZeRO-1, pp = 2 -> 1 and 1 -> 2,
// tp = 2 pp = 2 -> dp = 2, and with the distributed optimizer beside pp and tp:
// pp = 2 dp = 2 ZeRO-1 -> 1, tp = 2 dp = 2 ZeRO-1 -> 1, 1 -> tp = 2 pp = 2 dp = 2 ZeRO-1;
// an MoE Llama with ZeRO-1 beside ep: dp = 4 ep = 2 -> 1, 1 -> dp = 4 ep = 4,
// dp = 4 ep = 2 -> dp = 2 ep = 2; the in-process communicator) that train steps 4-6, against the
// saved layout's run going on without a break. Skips without a GPU (fails
// instead under SEXTANT_REQUIRE_GPU=1).
//
// What must hold, and why:
// - The fp32 master weights after loading are the saved ones exactly: the
//   whole tensor assembled from the loading ranks' master_parameter equals
//   the one assembled from the saving ranks' (shards put back together along
//   their split, ZeRO blocks merged), bit for bit — loading only moves bytes.
// - The losses of steps 4-6 continue the uninterrupted run's within the bound
//   of the layout change itself: tp = 2 against one rank differs by bf16
//   rounding of the row-parallel partial sums and other GEMM shapes, which
//   tensor_parallel_trainer_test.cc bounds at 1e-2 relative for the losses
//   (measured 0.3-1 %); dp = 2 against one rank only by fp32 reassociation and
//   flash attention's atomics, 1e-4 relative (data_parallel_trainer_test.cc);
//   pp = 2 against one rank (tp = 1) by the order the tied embedding's two
//   gradients are summed and the gradient norm's sum, 1e-3 relative, the
//   bound pipeline_trainer_test.cc holds a pipeline's later steps to.
//   With a pipeline, the tied wte is held by the first and the last stage;
//   both copies' masters go into the whole tensors and must agree.
//   A piece taken from the wrong rank or offset, or Adam moments not carried
//   (a fresh Adam makes step 4's update sign(g)·lr, ~10x the carried one at
//   this point), moves the losses by more.
// - The step count carries over (the learning rate and Adam's bias correction
//   of step 4).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_of_run.h"
#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/checkpoint/reshard_plan.h"
#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "engine/training/trainer_sharding.h"
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
constexpr std::size_t kBucketElements = 10'000;

struct Layout {
  int tp = 1, dp = 1;
  bool zero = false;
  int pp = 1;
  int cp = 1;  // context parallelism folds into dp in a checkpoint (checkpoint_layout_of)
  int ep = 1;  // expert parallelism (the MoE model), folded over dp
  int ranks() const { return tp * cp * dp * pp; }
  checkpoint::CheckpointLayout checkpoint() const { return checkpoint::checkpoint_layout_of(parallel()); }
  sim::ParallelLayout parallel() const {
    sim::ParallelLayout l;
    l.tp = tp;
    l.cp = cp;
    l.dp = dp;
    l.pp = pp;
    l.zero = zero ? 1 : 0;
    l.ep = ep;
    l.mbs = 1;
    l.gbs = 4;
    return l;
  }
};

struct ReshardCase {
  Layout saved, loaded;
  bool llama;
  double loss_tolerance;  // relative, for steps 4-6
  bool moe = false;       // the Llama with MoE layers (8 experts, top-2) in place of its MLPs
};

TrainerOptions options_for(std::uint64_t seed) {
  TrainerOptions o = testing::three_step_options();
  o.lr.warmup_steps = 2;
  o.lr.decay_steps = kSteps;
  o.bucket_elements = kBucketElements;  // several buckets, so ZeRO shards are many blocks
  o.seed = seed;
  return o;
}

// body(rank, trainer) on each rank of `l`, each with its own trainer.
template <typename Body>
void on_ranks(const sim::ModelConfig& model, const Layout& l, const TrainerOptions& options, Body body) {
  if (l.ranks() == 1) {
    Trainer trainer(model, l.parallel(), options);
    body(0, trainer);
    return;
  }
  comm::testing::run_in_process(l.ranks(), [&](int r, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, l.parallel(), world.stream());
    Trainer trainer(model, l.parallel(), options, groups);
    body(r, trainer);
  });
}

// The rank's sharding: its one model chunk's at pp = 1, else its pipeline
// stage's; what `sextant run` saves (training::trainer_sharding: cp folded into dp).
checkpoint::CheckpointSharding sharding_of(const Trainer& t, const sim::ModelConfig& model, const Layout& l) {
  const std::vector<checkpoint::CheckpointSharding> stages = training::trainer_sharding(t, model, kBucketElements);
  return l.pp > 1 ? stages.at(static_cast<std::size_t>(t.stage())) : stages.at(0);
}

using Masters = std::map<std::string, std::vector<float>>;  // whole tensors

// Adds rank (tp_rank) `trainer`'s master weights into the whole tensors:
// its shard's runs, skipping the NaN of ZeRO blocks it does not own. With a
// pipeline, the tied wte's second copy (the last stage's) must equal the first.
void add_masters(const Trainer& trainer, const checkpoint::CheckpointSharding& sh, int tp, int tp_rank, int pp,
                 Masters& whole, int ep = 1, int ep_rank = 0) {
  for (const checkpoint::TensorSharding& t : sh.tensors) {
    const std::vector<float> mine = trainer.master_parameter(t.name);
    std::vector<float>& w = whole[t.name];
    w.resize(static_cast<std::size_t>(t.rows * t.cols), std::nanf(""));
    std::size_t differ = 0;
    for (const checkpoint::ShardRun& run : checkpoint::shard_runs(t, tp, tp_rank, ep, ep_rank))
      for (std::uint64_t i = 0; i < run.elements; ++i) {
        const float x = mine[run.local + i];
        if (std::isnan(x)) continue;
        float& into = w[run.whole + i];
        const bool tied_copy = pp > 1 && t.name == "wte" && !std::isnan(into);
        differ += tied_copy && std::memcmp(&into, &x, sizeof x) != 0 ? 1 : 0;
        into = x;
      }
    EXPECT_EQ(differ, 0u) << t.name << ": the tied copies' master weights differ";
  }
}

class CheckpointReshardTest : public kernels::testing::GpuTestWithParam<ReshardCase> {};

TEST_P(CheckpointReshardTest, LoadedRunContinuesTheSavedLayoutsRun) {
  const ReshardCase& c = GetParam();
  sim::ModelConfig model =
      c.llama ? testing::small_model("reshard-llama", true, 4, 2) : testing::small_model("reshard-gpt", false, 2, 2);
  if (c.moe) {
    model.moe = sim::MoeConfig{};
    model.moe->num_experts = 8;
    model.moe->router_topk = 2;
    model.moe->ffn_hidden_size = 64;
  }
  // A vocabulary that tp = 1 and tp = 2 pad alike (256 is a multiple of 128·2): the
  // vocabulary-parallel table has the same rows in both layouts. (160, the small models'
  // own, pads to 256 at tp = 2 only: a different softmax, which loading refuses.)
  model.vocab_size = 256;
  const std::uint64_t seed = rng()();
  const TransformerShape whole_shape = transformer_shape_of(model, Layout{}.parallel());
  std::vector<Batch> batches;
  for (int i = 0; i < kSteps; ++i) batches.push_back(testing::random_batch(rng(), 4, whole_shape.seq, whole_shape.vocab));
  const fs::path root = fs::temp_directory_path() / ("sextant-reshard-gpu-" + std::to_string(::getpid()));
  fs::remove_all(root);

  // The saved layout, 6 steps without a break, saving after step 3.
  std::vector<double> uninterrupted;
  Masters saved_masters;
  checkpoint::CheckpointMetadata metadata;
  std::mutex mutex;
  checkpoint::begin_save(root.string(), kSaveAt);
  on_ranks(model, c.saved, options_for(seed), [&](int r, Trainer& trainer) {
    const checkpoint::CheckpointSharding sh = sharding_of(trainer, model, c.saved);
    for (int step = 1; step <= kSteps; ++step) {
      const Batch& b = batches[static_cast<std::size_t>(step - 1)];
      const StepResult result = trainer.step(b.inputs, b.targets);
      EXPECT_FALSE(result.skipped);
      if (r == 0) uninterrupted.push_back(result.loss);
      if (step != kSaveAt) continue;
      checkpoint::write_rank_shard(root.string(), kSaveAt, r, trainer.state());
      std::lock_guard<std::mutex> lock(mutex);
      // tp = cp = 1 beside ep: rank r is dp rank r, ep rank r mod ep.
      add_masters(trainer, sh, c.saved.tp, r % c.saved.tp, c.saved.pp, saved_masters, c.saved.ep, r % c.saved.ep);
      if (r == 0) metadata.sharding = sh;
    }
  });
  metadata.step = kSaveAt;
  metadata.data_batches = kSaveAt;
  metadata.layout = c.saved.checkpoint();
  metadata.world_size = c.saved.ranks();
  if (c.saved.pp > 1) {
    metadata.sharding = {};
    metadata.stages = checkpoint::pipeline_sharding(model, c.saved.parallel(), kBucketElements);
  }
  checkpoint::commit_save(root.string(), metadata, 1);

  // The loading layout: fresh trainers from the files, steps 4-6.
  const checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(root.string());
  std::vector<double> resumed;
  Masters loaded_masters;
  on_ranks(model, c.loaded, options_for(seed + 1), [&](int r, Trainer& trainer) {
    const checkpoint::CheckpointSharding sh = sharding_of(trainer, model, c.loaded);
    const checkpoint::ReshardPlan plan =
        checkpoint::plan_reshard(opened.metadata.layout, checkpoint::saved_stage_shardings(opened.metadata),
                                 c.loaded.checkpoint(), sh, r, "metadata.json");
    trainer.restore(checkpoint::read_resharded_state(opened, plan));
    EXPECT_EQ(trainer.steps_done(), kSaveAt);
    {
      std::lock_guard<std::mutex> lock(mutex);
      add_masters(trainer, sh, c.loaded.tp, r % c.loaded.tp, c.loaded.pp, loaded_masters, c.loaded.ep,
                  r % c.loaded.ep);
    }
    for (int step = kSaveAt + 1; step <= kSteps; ++step) {
      const Batch& b = batches[static_cast<std::size_t>(step - 1)];
      const StepResult result = trainer.step(b.inputs, b.targets);
      EXPECT_EQ(result.step, step);
      if (r == 0) resumed.push_back(result.loss);
    }
  });
  fs::remove_all(root);

  ASSERT_EQ(saved_masters.size(), loaded_masters.size());
  for (const auto& [name, want] : saved_masters) {
    const std::vector<float>& got = loaded_masters.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
        << name << ": the loaded fp32 master weights differ from the saved ones";
  }
  ASSERT_EQ(resumed.size(), 3u);
  double worst = 0;
  for (int s = 0; s < 3; ++s) {
    const double want = uninterrupted[static_cast<std::size_t>(kSaveAt + s)];
    EXPECT_NEAR(resumed[static_cast<std::size_t>(s)], want, c.loss_tolerance * want) << "step " << kSaveAt + 1 + s;
    worst = std::max(worst, std::abs(resumed[static_cast<std::size_t>(s)] - want) / want);
  }
  std::cout << "  saved tp=" << c.saved.tp << " cp=" << c.saved.cp << " dp=" << c.saved.dp << " zero=" << c.saved.zero << " pp=" << c.saved.pp
            << ", loaded tp=" << c.loaded.tp << " cp=" << c.loaded.cp << " dp=" << c.loaded.dp << " zero=" << c.loaded.zero
            << " pp=" << c.loaded.pp << (c.llama ? " (llama)" : " (gpt)")
            << ": losses 4-6 uninterrupted " << uninterrupted[3] << ", " << uninterrupted[4] << ", " << uninterrupted[5]
            << "; loaded " << resumed[0] << ", " << resumed[1] << ", " << resumed[2] << "; worst relative difference "
            << worst << " (bound " << c.loss_tolerance << "); masters equal bit for bit\n";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CheckpointReshardTest,
    ::testing::Values(ReshardCase{{2, 1, false}, {1, 1, false}, true, 1e-2},
                      ReshardCase{{1, 1, false}, {2, 1, false}, false, 1e-2},
                      ReshardCase{{1, 2, true}, {1, 1, false}, false, 1e-4},
                      ReshardCase{{1, 1, false}, {1, 2, true}, true, 1e-4},
                      ReshardCase{{1, 1, false, 2}, {1, 1, false, 1}, false, 1e-3},
                      ReshardCase{{1, 1, false, 1}, {1, 1, false, 2}, true, 1e-3},
                      ReshardCase{{2, 1, false, 2}, {1, 2, false, 1}, false, 1e-2},
                      // the distributed optimizer beside pp and tp
                      ReshardCase{{1, 2, true, 2}, {1, 1, false, 1}, false, 1e-3},
                      ReshardCase{{2, 2, true, 1}, {1, 1, false, 1}, false, 1e-2},
                      ReshardCase{{1, 1, false, 1}, {2, 2, true, 2}, true, 1e-2},
                      // context parallelism (folded into dp): cp x dp with ZeRO-1 to one rank, one
                      // rank to cp 4 with ZeRO-1, cp 2 x dp 2 to cp 4 (the optimizer's 4 shards kept),
                      // tp 2 x cp 2 to dp 2 (bounds: cp reorders fp32 sums, as dp does; tp its bf16 partial sums)
                      ReshardCase{{1, 2, true, 1, 2}, {1, 1, false, 1}, false, 1e-3},
                      ReshardCase{{1, 1, false, 1}, {1, 1, true, 1, 4}, true, 1e-3},
                      ReshardCase{{1, 2, true, 1, 2}, {1, 1, true, 1, 4}, true, 1e-3},
                      ReshardCase{{2, 1, false, 1, 2}, {1, 2, true, 1}, false, 1e-2},
                      // MoE with ZeRO-1 beside expert parallelism (the experts' fp32 state sharded
                      // over the expert-dp group): dp 4 ep 2 to one rank, one rank to dp 4 ep 4,
                      // dp 4 ep 2 to dp 2 ep 2 (bound: moe_trainer_test.cc's layouts, 2e-3)
                      ReshardCase{{1, 4, true, 1, 1, 2}, {1, 1, false, 1}, true, 2e-3, true},
                      ReshardCase{{1, 1, false, 1}, {1, 4, true, 1, 1, 4}, true, 2e-3, true},
                      ReshardCase{{1, 4, true, 1, 1, 2}, {1, 2, true, 1, 1, 2}, true, 2e-3, true}),
    [](const ::testing::TestParamInfo<ReshardCase>& info) {
      auto text = [](const Layout& l) {
        return "Tp" + std::to_string(l.tp) + (l.cp > 1 ? "Cp" + std::to_string(l.cp) : "") + "Dp" +
               std::to_string(l.dp) + (l.ep > 1 ? "Ep" + std::to_string(l.ep) : "") + (l.zero ? "Zero1" : "") +
               (l.pp > 1 ? "Pp" + std::to_string(l.pp) : "");
      };
      return text(info.param.saved) + "To" + text(info.param.loaded) + (info.param.llama ? "Llama" : "Gpt") +
             (info.param.moe ? "Moe" : "");
    });

}  // namespace
}  // namespace sextant::engine
