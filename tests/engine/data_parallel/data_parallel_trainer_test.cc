// Data-parallel training on one GPU: two trainers on the in-process
// communicator (two threads), each running half the micro-batches of the
// global batch, against one trainer running all of them. Skips without a GPU
// (fails instead under SEXTANT_REQUIRE_GPU=1).
//
// Tolerances, and why:
// - Loss of the first forward: the same kernels on the same weights and
//   tokens give the same per-token losses, and the trainer sums them in the
//   single rank's order, so only a different cuBLASLt algorithm could move it
//   (GEMM tuning is off: the heuristic sees the same shapes). 1e-6 relative.
// - Gradients: one rank adds micro-batches ((0 + 1) + 2) + 3 in fp32 (GEMMs
//   with beta = 1), two ranks (0 + 2) + (1 + 3): a reassociation of fp32 sums
//   (2^-24 relative each); on top, flash attention sums dQ with fp32 atomics
//   in any order, so even one rank's gradients move by up to ~1e-3 relative
//   L2 between runs (trainer_test.cc, FullRecomputation...). 2e-3 relative L2
//   per tensor. A rank that took the wrong micro-batches, a missing or doubled
//   reduction, or a bucket reduced before its last write gives errors of order 1.
// - After 3 AdamW steps: Adam divides each update by its running RMS, so a
//   gradient error moves an update by about the same relative amount — except
//   where an element's gradient is within that error of zero: there Adam's
//   first steps (m/sqrt(v) = sign(g)) can flip its update, by up to 2·lr a
//   step. For roughly normal gradients with ~1e-3 relative noise that is
//   ~1e-3 of the elements, so: at most 1 % of all elements may end with a
//   3-step weight change differing by more than lr/10 from the one rank's
//   (an unreduced or wrongly sharded gradient flips the sign of a quarter or
//   more of the first updates; a wrongly scaled one, which Adam hides, fails
//   the gradient and norm checks); the losses of steps 2 and 3 within 1e-4
//   relative (a few flipped updates of lr move them by far less), the
//   gradient norms 2e-3.
// - The two ranks' weights are bit-identical: both add the same reduced
//   gradients (the in-process all-reduce gives every rank the rank-order sum),
//   or, with the distributed optimizer, both receive the same all-gathered ones.
// - Distributed optimizer (ZeRO-1): the same bounds for the group's view —
//   each element's master weight and gradient from the rank that owns it
//   (exactly one rank must); the norm's sum of squares is added in another
//   order (fp32, ~1e-7).
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

// GPT: two heads; Llama: two query heads sharing one key/value head (GQA).
sim::ModelConfig small_model(bool llama) {
  return llama ? testing::small_model("dp-llama", true, 2, 1) : testing::small_model("dp-gpt", false, 2, 2);
}

using testing::Batch;
using testing::random_batch;
using testing::relative_l2_error;

// mbs 1, gbs 4: one rank runs micro-batches 0-3, two ranks 0, 2 and 1, 3.
sim::ParallelLayout layout_for_test(int dp, bool distributed_optimizer = false) {
  sim::ParallelLayout l = testing::one_gpu_layout(1, 4);
  l.dp = dp;
  l.zero = distributed_optimizer ? 1 : 0;
  return l;
}

// Buckets of 10,000 elements: smaller than a layer, so one bucket per layer
// (the Plan's never split a layer), reduced while backward still runs.
TrainerOptions options_for_test(std::uint64_t seed) {
  TrainerOptions o = testing::three_step_options();
  o.seed = seed;
  o.bucket_elements = 10'000;
  return o;
}

struct RunResult {
  std::vector<double> losses, grad_norms;
  std::vector<std::vector<float>> gradients;  // after forward_backward, by tensor
  std::vector<std::vector<float>> initial, final;  // master weights, by tensor (NaN: another rank's)
  std::vector<std::vector<float>> weights;  // bf16 weights after the steps
  int buckets = 0;
  int local_microbatches = 0;
};

// forward_backward on `batches[0]`, then one step on each batch.
void run(Trainer& trainer, const std::vector<Batch>& batches, RunResult& out) {
  const std::vector<std::string> names = trainer.tensor_names();
  for (const std::string& name : names) out.initial.push_back(trainer.master_parameter(name));
  out.losses.push_back(trainer.forward_backward(batches[0].inputs, batches[0].targets));
  for (const std::string& name : names) out.gradients.push_back(trainer.gradient(name));
  for (const Batch& b : batches) {
    const StepResult r = trainer.step(b.inputs, b.targets);
    out.losses.push_back(r.loss);
    out.grad_norms.push_back(r.grad_norm);
  }
  for (const std::string& name : names) {
    out.final.push_back(trainer.master_parameter(name));
    out.weights.push_back(trainer.weight(name));
  }
  out.buckets = static_cast<int>(trainer.gradient_buckets().size());
  out.local_microbatches = trainer.local_microbatches();
}

// The group's view under the distributed optimizer: every element's master
// weight and gradient from the one rank that holds its master copy.
RunResult owners_view(const std::vector<RunResult>& ranks) {
  RunResult view = ranks[0];
  for (std::size_t t = 0; t < view.initial.size(); ++t) {
    for (std::size_t i = 0; i < view.initial[t].size(); ++i) {
      int owners = 0;
      for (const RunResult& r : ranks) {
        if (std::isnan(r.initial[t][i])) continue;
        ++owners;
        view.initial[t][i] = r.initial[t][i];
        view.final[t][i] = r.final[t][i];
        view.gradients[t][i] = r.gradients[t][i];
      }
      EXPECT_EQ(owners, 1) << "tensor " << t << ", element " << i;
      if (owners != 1) return view;
    }
  }
  return view;
}

struct DataParallelCase {
  bool llama;
  bool distributed_optimizer;
};

class DataParallelTrainerTest : public kernels::testing::GpuTestWithParam<DataParallelCase> {};

TEST_P(DataParallelTrainerTest, TwoRanksTrainAsOneRankDoes) {
  const sim::ModelConfig model = small_model(GetParam().llama);
  const bool distributed_optimizer = GetParam().distributed_optimizer;
  const TransformerShape shape = transformer_shape_of(model, layout_for_test(1));
  ASSERT_TRUE(transformer_shape_problems(shape, model).empty());
  const TrainerOptions options = options_for_test(rng()());
  std::vector<Batch> batches;
  for (int i = 0; i < 3; ++i) batches.push_back(random_batch(rng(), 4, shape.seq, shape.vocab));

  RunResult single;
  {
    Trainer trainer(model, layout_for_test(1), options);
    run(trainer, batches, single);
  }
  const sim::ParallelLayout dp2 = layout_for_test(2, distributed_optimizer);
  std::vector<RunResult> ranks(2);
  comm::testing::run_in_process(2, [&](int r, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, dp2, world.stream());
    Trainer trainer(model, dp2, options, groups);
    run(trainer, batches, ranks[static_cast<std::size_t>(r)]);
  });
  for (std::size_t t = 0; t < single.gradients.size(); ++t)
    EXPECT_EQ(ranks[0].weights[t], ranks[1].weights[t]) << "tensor " << t;
  EXPECT_EQ(ranks[0].losses, ranks[1].losses);
  EXPECT_EQ(ranks[0].grad_norms, ranks[1].grad_norms);
  // What is compared with the single rank: each rank's own copy, or the owners'.
  const std::vector<RunResult> views =
      distributed_optimizer ? std::vector<RunResult>{owners_view(ranks)} : ranks;

  // 4 micro-batches over 2 ranks: 2 each; the buckets tile the buffer.
  EXPECT_EQ(ranks[0].local_microbatches, 2);
  // Buckets of whole layers (as the Plan's): 10,000 elements close one per
  // layer; the embeddings make their own, and an untied output layer too
  // (a tied model's final norm joins the last layer's).
  EXPECT_EQ(ranks[0].buckets, model.num_layers + (model.tie_embeddings ? 1 : 2));
  const std::size_t tensors = single.gradients.size();
  double worst_gradient = 0, worst_update = 0;
  const double lr = options.lr.max_lr;
  std::size_t elements = 0, moved = 0;
  for (const RunResult& r : views) {
    EXPECT_NEAR(r.losses[0], single.losses[0], 1e-6 * single.losses[0]);
    EXPECT_NEAR(r.losses[1], single.losses[1], 1e-6 * single.losses[1]);  // step 1: same weights
    for (int s = 2; s <= 3; ++s)
      EXPECT_NEAR(r.losses[static_cast<std::size_t>(s)], single.losses[static_cast<std::size_t>(s)],
                  1e-4 * single.losses[static_cast<std::size_t>(s)]) << "step " << s;
    for (int s = 0; s < 3; ++s)
      EXPECT_NEAR(r.grad_norms[static_cast<std::size_t>(s)], single.grad_norms[static_cast<std::size_t>(s)],
                  2e-3 * single.grad_norms[static_cast<std::size_t>(s)]) << "step " << s + 1;
    ASSERT_EQ(r.gradients.size(), tensors);
    for (std::size_t t = 0; t < tensors; ++t) {
      const double g = relative_l2_error(r.gradients[t], single.gradients[t]);
      EXPECT_LT(g, 2e-3) << "tensor " << t;
      worst_gradient = std::max(worst_gradient, g);
      std::vector<float> got(r.final[t].size()), want(got.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        got[i] = r.final[t][i] - r.initial[t][i];
        want[i] = single.final[t][i] - single.initial[t][i];
      }
      const double u = relative_l2_error(got, want);  // printed; one flip dominates a small tensor's
      worst_update = std::max(worst_update, u);
      for (std::size_t i = 0; i < got.size(); ++i) moved += std::abs(got[i] - want[i]) > 0.1 * lr ? 1 : 0;
      elements += got.size();
    }
  }
  EXPECT_LE(static_cast<double>(moved), 1e-2 * static_cast<double>(elements))
      << moved << " of " << elements << " weights moved by more than lr/10 from the one-rank run";
  for (std::size_t t = 0; t < tensors && !distributed_optimizer; ++t) {
    EXPECT_EQ(ranks[0].gradients[t], ranks[1].gradients[t]) << "tensor " << t;
    EXPECT_EQ(ranks[0].final[t], ranks[1].final[t]) << "tensor " << t;
  }
  std::cout << "  " << model.name << (distributed_optimizer ? " (distributed optimizer)" : "") << ": " << ranks[0].buckets << " buckets; losses one rank "
            << single.losses[1] << ", " << single.losses[2] << ", " << single.losses[3] << " vs dp=2 "
            << ranks[0].losses[1] << ", " << ranks[0].losses[2] << ", " << ranks[0].losses[3]
            << "; worst gradient relative L2 error " << worst_gradient
            << ", worst 3-step update error " << worst_update << ", " << moved << " of " << elements
            << " weights moved by more than lr/10\n";
}

INSTANTIATE_TEST_SUITE_P(GptAndLlama, DataParallelTrainerTest,
                         ::testing::Values(DataParallelCase{false, false}, DataParallelCase{true, false},
                                           DataParallelCase{false, true}, DataParallelCase{true, true}),
                         [](const ::testing::TestParamInfo<DataParallelCase>& info) {
                           return std::string(info.param.llama ? "llama" : "gpt") +
                                  (info.param.distributed_optimizer ? "_distributed_optimizer" : "");
                         });

// overlap_param_gather moves only where the bf16 weights' all-gathers run (the
// next step's start, each bucket waited for before its first reader) and
// where the compute stream waits: the same kernels on the same numbers. So
// the run equals the plain one bit for bit when the plain run repeats itself
// bit for bit (flash attention's dQ atomics may not: then within twice the
// plain runs' own difference). A forward that read a bucket before its gather
// finished would compute with the weights of one update earlier on the ranks
// that do not own it, and the two ranks' losses would part.
class OverlapParamGatherTest : public kernels::testing::GpuTestWithParam<bool> {};

// Equal bit for bit, NaN included (a ZeRO rank's masters are NaN where another rank owns them).
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t t = 0; t < a.size(); ++t)
    if (a[t].size() != b[t].size() || std::memcmp(a[t].data(), b[t].data(), a[t].size() * sizeof(float)) != 0) return false;
  return true;
}

TEST_P(OverlapParamGatherTest, TrainsAsTheGatherAfterTheUpdateDoes) {
  const sim::ModelConfig model = small_model(GetParam());
  const TransformerShape shape = transformer_shape_of(model, layout_for_test(1));
  const TrainerOptions options = options_for_test(rng()());
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(random_batch(rng(), 4, shape.seq, shape.vocab));
  auto run_dp2 = [&](bool overlap) {
    sim::ParallelLayout layout = layout_for_test(2, true);
    layout.overlap_param_gather = overlap;
    std::vector<RunResult> ranks(2);
    comm::testing::run_in_process(2, [&](int r, comm::Communicator& world) {
      const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
      Trainer trainer(model, layout, options, groups);
      run(trainer, batches, ranks[static_cast<std::size_t>(r)]);
    });
    return ranks;
  };
  const std::vector<RunResult> plain = run_dp2(false), again = run_dp2(false), overlapped = run_dp2(true);
  for (std::size_t r = 0; r < 2; ++r) {
    const bool reproducible = plain[r].losses == again[r].losses && plain[r].weights == again[r].weights;
    if (reproducible) {
      EXPECT_EQ(overlapped[r].losses, plain[r].losses) << "rank " << r;
      EXPECT_EQ(overlapped[r].grad_norms, plain[r].grad_norms) << "rank " << r;
      EXPECT_EQ(overlapped[r].weights, plain[r].weights) << "rank " << r;
      EXPECT_TRUE(same_bits(overlapped[r].final, plain[r].final)) << "rank " << r;  // NaN where another rank owns
    } else {
      for (std::size_t s = 0; s < plain[r].losses.size(); ++s) {
        const double noise = std::abs(again[r].losses[s] - plain[r].losses[s]);
        EXPECT_NEAR(overlapped[r].losses[s], plain[r].losses[s], std::max(1e-6 * plain[r].losses[s], 2 * noise))
            << "rank " << r << ", step " << s;
      }
    }
    std::cout << "  " << model.name << " rank " << r << ": losses " << plain[r].losses.back() << " (gathers after the update) vs "
              << overlapped[r].losses.back() << " (overlapped with the next forward); "
              << (reproducible ? "plain runs repeat bit for bit, overlapped "
                               : "plain runs differ (atomics), overlapped ")
              << (overlapped[r].weights == plain[r].weights ? "bit-identical" : "within their noise") << "\n";
  }
  EXPECT_EQ(overlapped[0].weights, overlapped[1].weights);
  EXPECT_EQ(overlapped[0].losses, overlapped[1].losses);
}

INSTANTIATE_TEST_SUITE_P(GptAndLlama, OverlapParamGatherTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "llama" : "gpt"; });

class DataParallelTrainerBatchTest : public kernels::testing::GpuTest {};

TEST_F(DataParallelTrainerBatchTest, RefusesABatchTheRanksCannotShare) {
  const sim::ModelConfig model = small_model(false);
  const TrainerOptions options = options_for_test(1);
  sim::ParallelLayout layout = testing::one_gpu_layout(2, 6);  // 3 micro-batches of 2: not a multiple of 2 ranks
  layout.dp = 2;
  comm::testing::run_in_process(2, [&](int, comm::Communicator& world) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
    try {
      Trainer trainer(model, layout, options, groups);
      ADD_FAILURE() << "a global batch of 6 at mbs 2 over 2 ranks was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("the global batch (6) must be a multiple of mbs (2) times dp (2)"),
                std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace sextant::engine
