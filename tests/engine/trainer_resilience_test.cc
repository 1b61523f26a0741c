// What the trainer does when a step goes wrong, on one GPU (several ranks on
// the in-process communicator). Skips without a GPU (fails instead under
// SEXTANT_REQUIRE_GPU=1).
//
// - A NaN in one weight: the step's loss and gradient norm are NaN, the
//   update is skipped on the device (every weight, master and moment as
//   before, the step count unchanged), and first_nonfinite_gradient names the
//   first tensor in the flat layout's order whose gradient is not finite —
//   wte here, since a NaN in the forward reaches every gradient.
// - A NaN put into one gradient (after a forward and backward) is found by
//   name: in one rank's tp shard, or in a ZeRO-1 block another rank owns
//   (each rank then names it: the per-tensor sums are all-reduced), and not
//   found when every gradient is finite.
// - A rank that stops calling collectives: the other's step fails within the
//   group's timeout with a CommError naming the collective, the group and the
//   rank, instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/comm/comm_error.h"
#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

using testing::Batch;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class TrainerResilienceTest : public kernels::testing::GpuTest {};

TEST_F(TrainerResilienceTest, ANanWeightSkipsTheUpdateAndNamesTheFirstGradient) {
  const sim::ModelConfig model = testing::small_model("nan-gpt", false, 2, 2);
  TrainerOptions options = testing::three_step_options();
  options.seed = rng()();
  Trainer trainer(model, testing::one_gpu_layout(1, 2), options);
  const TransformerShape& shape = trainer.shape();
  const Batch b = testing::random_batch(rng(), 2, shape.seq, shape.vocab);
  ASSERT_FALSE(trainer.step(b.inputs, b.targets).skipped);
  std::vector<float> bias = trainer.master_parameter("layers.1.fc2_bias");
  bias[5] = std::numeric_limits<float>::quiet_NaN();
  trainer.set_parameter("layers.1.fc2_bias", bias);
  const checkpoint::TrainerState before = trainer.state();
  const StepResult r = trainer.step(b.inputs, b.targets);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(std::isnan(r.loss));
  EXPECT_FALSE(std::isfinite(r.grad_norm));
  EXPECT_EQ(trainer.steps_done(), 1);
  const checkpoint::TrainerState after = trainer.state();
  EXPECT_EQ(before.weights_bf16, after.weights_bf16) << "the skipped step changed the bf16 weights";
  EXPECT_TRUE(same_bits(before.master, after.master)) << "the skipped step changed the master weights";
  EXPECT_TRUE(same_bits(before.adam_m, after.adam_m) && same_bits(before.adam_v, after.adam_v));
  EXPECT_EQ(trainer.first_nonfinite_gradient(), "wte");
}

struct FindCase {
  int tp, dp;
  bool zero;
};

class NonFiniteGradientTest : public kernels::testing::GpuTestWithParam<FindCase> {};

TEST_P(NonFiniteGradientTest, TheFirstNonFiniteGradientIsNamedOnEveryRank) {
  const FindCase c = GetParam();
  const sim::ModelConfig model = testing::small_model("find-gpt", false, 2, 2);
  sim::ParallelLayout layout;
  layout.tp = c.tp;
  layout.dp = c.dp;
  layout.mbs = 1;
  layout.gbs = 4;
  layout.zero = c.zero ? 1 : 0;
  const TransformerShape shape = transformer_shape_of(model, layout);
  TrainerOptions options = testing::three_step_options();
  options.bucket_elements = 10'000;
  options.seed = rng()();
  const Batch b = testing::random_batch(rng(), 4, shape.seq, shape.vocab);
  std::vector<std::string> found_clean(static_cast<std::size_t>(c.tp * c.dp)), found(found_clean.size());
  std::vector<std::string> poisoned(found_clean.size());
  comm::testing::run_in_process(c.tp * c.dp, [&](int r, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
    Trainer trainer(model, layout, options, groups);
    trainer.forward_backward(b.inputs, b.targets);
    found_clean[static_cast<std::size_t>(r)] = trainer.first_nonfinite_gradient();
    // The last rank alone poisons an element it holds the reduced gradient of:
    // with ZeRO-1, the first element of its block of the first bucket (the
    // other ranks never see it); else one in layers.1.fc1_weight (a tp shard).
    std::string name = "layers.1.fc1_weight";
    std::size_t element = 3;
    if (c.zero) {
      const GradientBucketRange& first = trainer.gradient_buckets().front();
      const std::size_t flat = first.begin + static_cast<std::size_t>(c.dp - 1) * first.elements / c.dp;
      for (const ParameterTensor& t : trainer.chunk_layout(0).tensors())
        if (t.offset <= flat && flat < t.offset + t.elements()) {
          name = t.name;
          element = flat - t.offset;
        }
    }
    // And a later tensor everywhere, which must not be the one named.
    std::vector<float> gamma = trainer.gradient("final_norm_gamma");
    gamma[0] = std::numeric_limits<float>::infinity();
    trainer.set_gradient("final_norm_gamma", gamma);
    if (r == c.tp * c.dp - 1) {
      std::vector<float> g = trainer.gradient(name);
      ASSERT_LT(element, g.size());
      g[element] = std::numeric_limits<float>::quiet_NaN();
      trainer.set_gradient(name, g);
    }
    poisoned[static_cast<std::size_t>(r)] = name;
    found[static_cast<std::size_t>(r)] = trainer.first_nonfinite_gradient();
  });
  for (std::size_t r = 0; r < found.size(); ++r) {
    EXPECT_EQ(found_clean[r], "") << "rank " << r;
    EXPECT_EQ(found[r], poisoned.back()) << "rank " << r;
  }
  std::cout << "  tp=" << c.tp << " dp=" << c.dp << (c.zero ? " zero=1" : "") << ": NaN in " << poisoned.back()
            << " (last rank only) named on every rank: " << found[0] << "\n";
}

INSTANTIATE_TEST_SUITE_P(Layouts, NonFiniteGradientTest,
                         ::testing::Values(FindCase{1, 1, false}, FindCase{2, 1, false}, FindCase{1, 2, true}),
                         [](const ::testing::TestParamInfo<FindCase>& info) {
                           return "Tp" + std::to_string(info.param.tp) + "Dp" + std::to_string(info.param.dp) +
                                  (info.param.zero ? "Zero1" : "");
                         });

// A pipeline: each stage holds only its layers, yet every rank names the same
// tensor, the first in the whole model's order. pp = 2 x tp = 2, 4 layers (two
// per stage): a NaN put into stage 1's layers.3.fc1_weight (one tp rank's
// shard) is named on all four ranks; adding a NaN in stage 0's layers.1.fc2_bias
// makes that one the first; with every gradient finite, none is named.
TEST_F(TrainerResilienceTest, APipelineNamesTheFirstNonFiniteGradientOfTheWholeModel) {
  sim::ModelConfig model = testing::small_model("find-pp", false, 2, 2);
  model.num_layers = 4;
  sim::ParallelLayout layout;
  layout.tp = 2;
  layout.pp = 2;
  layout.mbs = 1;
  layout.gbs = 4;
  const TrainerOptions options = testing::three_step_options();
  const Batch b = testing::random_batch(rng(), 4, static_cast<int>(model.seq_length), static_cast<int>(model.vocab_size));
  std::vector<std::string> clean(4), later(4), earlier(4);
  comm::testing::run_in_process(4, [&](int r, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
    Trainer trainer(model, layout, options, groups);
    trainer.forward_backward(b.inputs, b.targets);
    const auto rank = static_cast<std::size_t>(r);
    clean[rank] = trainer.first_nonfinite_gradient();
    auto poison = [&](const std::string& name) {
      std::vector<float> g = trainer.gradient(name);
      g[1] = std::numeric_limits<float>::quiet_NaN();
      trainer.set_gradient(name, g);
    };
    // Ranks are tp-major inside a stage: world rank 3 is stage 1, tp rank 1; rank 0 stage 0, tp rank 0.
    if (r == 3) poison("layers.3.fc1_weight");
    later[rank] = trainer.first_nonfinite_gradient();
    if (r == 0) poison("layers.1.fc2_bias");
    earlier[rank] = trainer.first_nonfinite_gradient();
  });
  for (std::size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(clean[r], "") << "rank " << r;
    EXPECT_EQ(later[r], "layers.3.fc1_weight") << "rank " << r;
    EXPECT_EQ(earlier[r], "layers.1.fc2_bias") << "rank " << r;
  }
}

TEST_F(TrainerResilienceTest, ARankThatStopsMakesThePeersStepFailNamingTheCollective) {
  // tp = 2 with a 2 s group timeout: rank 1 builds its trainer and then never
  // steps (a hung or dead peer); rank 0's first tensor-parallel all-reduce
  // waits 2 s for it and throws.
  const sim::ModelConfig model = testing::small_model("hang-gpt", false, 2, 2);
  sim::ParallelLayout layout;
  layout.tp = 2;
  layout.mbs = 1;
  layout.gbs = 2;
  const TransformerShape shape = transformer_shape_of(model, layout);
  TrainerOptions options = testing::three_step_options();
  options.comm_timeout = std::chrono::seconds(2);
  const Batch b = testing::random_batch(rng(), 2, shape.seq, shape.vocab);
  std::string message;
  double waited_s = 0;
  try {
    comm::testing::run_in_process(
        2,
        [&](int r, comm::Communicator& world) {
          const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
          Trainer trainer(model, layout, options, groups);
          if (r == 1) return;
          const auto start = std::chrono::steady_clock::now();
          try {
            trainer.step(b.inputs, b.targets);
          } catch (...) {
            waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            throw;
          }
        },
        std::chrono::seconds(2));
  } catch (const comm::CommError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("on group 'tp' (rank 0 of 2): timeout"), std::string::npos) << message;
  // Named by the collective that waited (the first row-parallel all-reduce), not a generic wait.
  EXPECT_EQ(message.rfind("synchronize", 0), std::string::npos) << message;
  EXPECT_NE(message.find(" of 2 ranks arrived within 2 s"), std::string::npos) << message;
  EXPECT_LT(waited_s, 30.0);
  std::cout << "  rank 0 gave up after " << waited_s << " s: " << message << "\n";
}

}  // namespace
}  // namespace sextant::engine
