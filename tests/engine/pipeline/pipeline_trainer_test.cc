// Pipeline parallelism in the whole model on one GPU: the ranks of a pipeline
// (and of tp x dp beside it) as threads on the in-process communicator, each
// holding its stage's layers (the embedding on the first, the final norm,
// output layer and loss on the last, a tied wte on both), against one trainer
// holding all of it, from the same weights and data. Skips without a GPU
// (fails instead under SEXTANT_REQUIRE_GPU=1).
//
// Cases, for a small GPT (tied embeddings, biases, learned positions) and a
// small Llama (untied, RoPE, SwiGLU, GQA), 8 layers, 8 micro-batches of 1:
//   pp = 2 (1F1B), pp = 4 vpp = 2 (interleaved 1F1B, one layer per chunk),
//   tp = 2 x pp = 2 x dp = 2 (8 ranks, groups in the order tp-cp-ep-dp-pp);
//   and Llama pp = 2 split 3 + 5 (pp_layout), GPT pp = 2 with full recomputation;
//   tp = 2 with sequence parallelism beside pp = 2 (GPT; beside dp = 2 too) and
//   pp = 2 vpp = 2 (Llama): the stages exchange the residual stream's shards;
//   the distributed optimizer (zero=1) beside dp = 2: GPT pp = 2 (the tied
//   wte's two copies sharded at different offsets), GPT pp = 4 vpp = 2 (a
//   decayed range per chunk), Llama tp = 2 x pp = 2 (norm over dp, tp, pp),
//   and GPT pp = 2 with overlap_param_gather (the gathers at the next step's start).
//   With it a rank's gradient holds the group's sum only in the blocks it
//   owns: the owners' blocks, checked to tile each tensor once, are put
//   together and compared as the whole tensor.
//
// Tolerances, and why. Without tp a stage runs the very kernels one GPU runs
// on the same shapes and inputs (the transfers are copies), so the forward's
// per-token losses are the same numbers and the mean, summed in the same
// order, agrees to 1e-5 relative (it should be exact; the margin is for
// nothing we know of). The gradients differ only where the fp32 sums run in
// another order — the tied wte's two halves added after the backward instead
// of in it, the fc2 bias at a stage boundary summed by its own kernel instead
// of the norm's, flash attention's dQ atomics (run to run) — of order 1e-6
// relative, and an occasional bf16 rounding flipped by one (2^-8) that
// propagates: bounded at 1e-2 relative L2 per tensor, and the losses after 1
// to 3 AdamW updates (lr 1e-3) at 1e-3 relative. With tp = 2 the
// tensor-parallel test's bounds (tensor_parallel_trainer_test.cc: 1e-2 for
// losses, 3e-2 per gradient tensor, from bf16 partial sums). A wrong slot, a
// missing transfer, a missing tied-gradient sum or a lost boundary bias gives
// errors of order 1. The two copies of a tied wte get the same sum and the
// same update: checked equal, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "kernels/bf16.h"
#include "sim/core/layer_shape.h"
#include "sim/core/pipeline_split.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/engine/tensor_shards.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::pipeline {
namespace {

using Tensors = std::map<std::string, std::vector<float>>;

struct PipelineCase {
  bool llama;
  int pp, vpp, tp, dp;
  const char* pp_layout = "";  // uneven stages (sim/core/pipeline_split.h); "" for even
  bool full_recompute = false;
  bool sp = false;  // with tp: sequence parallelism, the stages exchanging sequence shards
  bool zero = false;  // with dp: the distributed optimizer
  bool overlap_param_gather = false;  // with zero: the weights gathered at the next step's start
};

std::string case_name(const PipelineCase& c) {
  std::string s = std::string(c.llama ? "llama" : "gpt") + "_pp" + std::to_string(c.pp);
  if (c.vpp > 1) s += "_vpp" + std::to_string(c.vpp);
  if (c.tp > 1) s += "_tp" + std::to_string(c.tp);
  if (c.sp) s += "_sp";
  if (c.dp > 1) s += "_dp" + std::to_string(c.dp);
  if (*c.pp_layout != 0) s += "_uneven";
  if (c.full_recompute) s += "_recompute_full";
  if (c.zero) s += "_zero1";
  if (c.overlap_param_gather) s += "_overlap_param_gather";
  return s;
}

constexpr int kGlobalBatch = 8;
constexpr int kLayers = 8;

sim::ModelConfig model_of(bool llama) {
  sim::ModelConfig m = llama ? testing::small_model("pp-llama", true, 4, 2) : testing::small_model("pp-gpt", false, 2, 2);
  m.num_layers = kLayers;
  return m;
}

struct RunResult {
  int stage = 0, tp_rank = 0;
  std::vector<double> losses;  // forward_backward, then steps 1-3
  Tensors gradients, weights;
  Tensors masters;  // after set_parameter: NaN where another ZeRO-1 rank owns the element
};

void run(Trainer& trainer, const std::vector<std::string>& names, const Tensors& start,
         const std::vector<testing::Batch>& batches, RunResult& out) {
  for (const std::string& name : names) trainer.set_parameter(name, start.at(name));
  for (const std::string& name : names) out.masters[name] = trainer.master_parameter(name);
  out.losses.push_back(trainer.forward_backward(batches[0].inputs, batches[0].targets));
  for (const std::string& name : names) out.gradients[name] = trainer.gradient(name);
  for (const testing::Batch& b : batches) out.losses.push_back(trainer.step(b.inputs, b.targets).loss);
  for (const std::string& name : names) out.weights[name] = trainer.weight(name);
}

class PipelineTrainerTest : public kernels::testing::GpuTestWithParam<PipelineCase> {};

TEST_P(PipelineTrainerTest, StagesTrainAsOneRankDoes) {
  const PipelineCase c = GetParam();
  const sim::ModelConfig model = model_of(c.llama);
  // At tp > 1 the vocabulary is padded to a multiple of 128·tp (vocabulary-parallel embedding and
  // cross entropy: 160 -> 256 at tp = 2); the one-rank model gets the padded vocabulary, whose extra
  // rows take part in the softmax, and the tokens stay below the true 160.
  sim::ModelConfig padded = model;
  padded.vocab_size = sim::padded_vocab_size(model.vocab_size, c.tp);
  const sim::ParallelLayout one_rank = testing::one_gpu_layout(1, kGlobalBatch,
                                                               c.full_recompute ? sim::Recompute::kFull : sim::Recompute::kNone);
  const TransformerShape one = transformer_shape_of(padded, one_rank);
  sim::ParallelLayout layout;
  layout.pp = c.pp;
  layout.vpp = c.vpp;
  layout.schedule = c.vpp > 1 ? sim::Schedule::kInterleaved : sim::Schedule::kOneFOneB;
  layout.tp = c.tp;
  layout.sp = c.sp;
  layout.dp = c.dp;
  layout.mbs = 1;
  layout.gbs = kGlobalBatch;
  layout.pp_layout = c.pp_layout;
  layout.recompute = c.full_recompute ? sim::Recompute::kFull : sim::Recompute::kNone;
  layout.zero = c.zero ? 1 : 0;
  layout.overlap_param_gather = c.overlap_param_gather;
  ASSERT_EQ(sim::check_pipeline_split(model, layout), sim::SplitProblem::kNone);
  const TransformerShape part = transformer_shape_of(model, layout);
  TrainerOptions options = testing::three_step_options();
  // dp > 1: buckets of a layer or two, so the first stage reduces several while its backward goes on.
  options.bucket_elements = 10'000;

  // Weights N(0, 0.05), rounded to bf16 so every run starts from the same numbers.
  Tensors weights;
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const ParameterLayout one_layout(one);
  std::vector<std::string> all_names;
  for (const ParameterTensor& t : one_layout.tensors()) {
    all_names.push_back(t.name);
    std::vector<float>& w = weights[t.name];
    for (std::size_t i = 0; i < t.elements(); ++i)
      w.push_back(t.name.find("gamma") != std::string::npos ? 1.0f : kernels::to_float(kernels::from_float(normal(rng()))));
  }
  std::vector<testing::Batch> batches;
  for (int i = 0; i < 3; ++i) batches.push_back(testing::random_batch(rng(), kGlobalBatch, one.seq, static_cast<int>(model.vocab_size)));

  RunResult single;
  {
    Trainer trainer(padded, one_rank, options);
    run(trainer, all_names, weights, batches, single);
  }
  const int world = c.tp * c.dp * c.pp;
  std::vector<RunResult> ranks(static_cast<std::size_t>(world));
  comm::testing::run_in_process(world, [&](int r, comm::Communicator& w) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(w, layout, w.stream());
    RunResult& out = ranks[static_cast<std::size_t>(r)];
    out.stage = groups.pp->rank();
    out.tp_rank = groups.tp->rank();
    Trainer trainer(model, layout, options, groups);
    Tensors shards;
    for (const std::string& name : trainer.tensor_names())
      shards[name] = testing::shard_of(name, weights.at(name), one, part, out.tp_rank, c.tp);
    run(trainer, trainer.tensor_names(), shards, batches, out);
  });

  const bool exact_forward = c.tp == 1;
  const double first_tolerance = exact_forward ? 1e-5 : 1e-2;
  const double step_tolerance = exact_forward ? 1e-3 : 1e-2;
  const double gradient_tolerance = exact_forward ? 1e-2 : 3e-2;
  double worst = 0;
  std::string worst_name;
  std::map<std::string, int> held;  // how many ranks of tp rank 0 hold each tensor
  // ZeRO-1: a rank's gradient holds the dp group's sum only in the blocks it
  // owns (its masters not NaN there): per stage, tp rank and tensor, the
  // owners' blocks put together make the whole shard's reduced gradient,
  // compared like the other layouts' (not block by block: a block of a few
  // rows has a noisier relative error than its tensor).
  std::map<std::tuple<int, int, std::string>, std::vector<float>> assembled;
  auto check = [&](const std::vector<float>& got, const std::vector<float>& want, const std::string& name, int stage,
                   int tp_rank) {
    const double error = testing::relative_l2_error(got, want);
    EXPECT_LT(error, gradient_tolerance) << name << " on stage " << stage << ", tp rank " << tp_rank;
    if (error > worst) {
      worst = error;
      worst_name = name;
    }
  };
  for (const RunResult& got : ranks) {
    EXPECT_NEAR(got.losses[0], single.losses[0], first_tolerance * single.losses[0]) << "stage " << got.stage;
    for (std::size_t s = 1; s < got.losses.size(); ++s)
      EXPECT_NEAR(got.losses[s], single.losses[s], step_tolerance * single.losses[s]) << "step " << s;
    for (const auto& [name, gradient] : got.gradients) {
      const std::vector<float> want = testing::shard_of(name, single.gradients.at(name), one, part, got.tp_rank, c.tp);
      ASSERT_EQ(gradient.size(), want.size()) << name;
      if (got.tp_rank == 0) ++held[name];
      if (!c.zero) {
        check(gradient, want, name, got.stage, got.tp_rank);
        continue;
      }
      std::vector<float>& whole = assembled[{got.stage, got.tp_rank, name}];
      if (whole.empty()) whole.assign(want.size(), std::numeric_limits<float>::quiet_NaN());
      const std::vector<float>& master = got.masters.at(name);
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(master[i])) continue;
        EXPECT_TRUE(std::isnan(whole[i])) << name << " element " << i << " owned twice";
        whole[i] = gradient[i];
      }
    }
  }
  for (const auto& [at, whole] : assembled) {
    const auto& [stage, tp_rank, name] = at;
    // The dp ranks own every element of every tensor between them.
    EXPECT_EQ(std::count_if(whole.begin(), whole.end(), [](float x) { return std::isnan(x); }), 0)
        << name << " on stage " << stage;
    check(whole, testing::shard_of(name, single.gradients.at(name), one, part, tp_rank, c.tp), name, stage, tp_rank);
  }
  if (c.zero) {
    EXPECT_FALSE(assembled.empty());
  }
  // Every tensor is held by some stage: once per dp rank, and wte twice when tied.
  for (const std::string& name : all_names) {
    const int copies = name == "wte" && model.tie_embeddings ? 2 : 1;
    EXPECT_EQ(held[name], copies * c.dp) << name;
  }
  // The tied copies and the dp replicas end with the same bf16 weights.
  for (const RunResult& a : ranks)
    for (const RunResult& b : ranks)
      if (a.tp_rank == b.tp_rank)
        for (const auto& [name, w] : a.weights)
          if (b.weights.count(name) != 0) {
            EXPECT_EQ(w, b.weights.at(name)) << name;
          }
  std::cout << "  " << case_name(c) << ": loss one rank " << single.losses[0] << ", pipeline " << ranks[0].losses[0]
            << "; after 3 steps " << single.losses[3] << " vs " << ranks[0].losses[3]
            << "; worst gradient relative L2 error " << worst << " (" << worst_name << ")\n";
}

INSTANTIATE_TEST_SUITE_P(GptAndLlama, PipelineTrainerTest,
                         ::testing::Values(PipelineCase{false, 2, 1, 1, 1}, PipelineCase{true, 2, 1, 1, 1},
                                           PipelineCase{false, 4, 2, 1, 1}, PipelineCase{true, 4, 2, 1, 1},
                                           PipelineCase{false, 2, 1, 2, 2}, PipelineCase{true, 2, 1, 2, 2},
                                           // 3 + 5 layers, and the forward again before each backward
                                           PipelineCase{true, 2, 1, 1, 1, "Ettt|tttttL"},
                                           PipelineCase{false, 2, 1, 1, 1, "", true},
                                           // tp 2 with sp: the stages exchange (T/2, h) shards
                                           PipelineCase{false, 2, 1, 2, 1, "", false, true},
                                           PipelineCase{true, 2, 2, 2, 1, "", false, true},
                                           PipelineCase{false, 2, 1, 2, 2, "", false, true},
                                           // the distributed optimizer: the tied wte's blocks, chunks' decay ranges
                                           PipelineCase{false, 2, 1, 1, 2, "", false, false, true},
                                           PipelineCase{false, 4, 2, 1, 2, "", false, false, true},
                                           PipelineCase{true, 2, 1, 2, 2, "", false, false, true},
                                           PipelineCase{false, 2, 1, 1, 2, "", false, false, true, true}),
                         [](const ::testing::TestParamInfo<PipelineCase>& info) { return case_name(info.param); });

class PipelineTrainerRefusal : public kernels::testing::GpuTest {};

TEST_F(PipelineTrainerRefusal, RefusesZeroAboveOne) {
  sim::ParallelLayout layout;
  layout.pp = 2;
  layout.dp = 2;
  layout.zero = 2;
  layout.gbs = 4;
  const TrainerOptions options = testing::three_step_options();
  comm::testing::run_in_process(4, [&](int, comm::Communicator& w) {
    const comm::ParallelGroups groups = comm::make_parallel_groups(w, layout, w.stream());
    EXPECT_THROW(Trainer(model_of(false), layout, options, groups), std::invalid_argument);
  });
}

}  // namespace
}  // namespace sextant::engine::pipeline
