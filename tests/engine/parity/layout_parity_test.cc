// Issue 13's acceptance test: every parallel layout the engine runs trains
// as one GPU does. GPT-350M (the preset: 24 layers, hidden 1024, 16 heads,
// vocabulary 51,200, tied embeddings, biases; sequence 1024 instead of 2048 to
// halve the time and the activations of eight in-process ranks) and a small
// Llama (8 layers, hidden 1024, 16 query heads over 4 key/value groups,
// SwiGLU of 2816, RoPE, RMSNorm, untied, vocabulary 32,768, sequence 1024),
// 20 optimizer steps of 8 sequences (mbs 1) from the same weights and data, on
// one GPU: the layout's ranks as threads on the in-process communicator
// against one Trainer holding the whole model. Layouts: tp 2, tp 2 + sp,
// tp 4 + sp, pp 2, pp 4 vpp 2 (interleaved 1F1B), dp 2, dp 2 + the distributed
// optimizer (ZeRO-1), tp 2 x pp 2 x dp 2 (8 ranks, groups in the order
// tp-cp-ep-dp-pp), the same with sp, tp 2 x dp 2 with ZeRO-1, and tp 2 x pp 2
// x dp 2 with ZeRO-1 (issue 13's `tp=2,pp=2,dp=2,dist_opt=1`); and with
// recomputation: tp 2 + sp selective, tp 2 + sp x pp 2 x dp 2 + ZeRO-1 full
// (the one-GPU reference recomputes nothing). Skips without a
// GPU (fails instead under SEXTANT_REQUIRE_GPU=1).
//
// Both vocabularies are multiples of 128·4, so no layout pads them
// (sim::padded_vocab_size) and every run has the same softmax.
//
// Initial weights: N(0, 0.02) rounded to bf16 (norm gains 1), set in every
// run (each rank its shard).
//
// The data are learnable — each sequence counts up from a random start by a
// random stride of 1-3, modulo 1000 — so the loss falls (from ln(vocab) ≈ 10.8
// towards 7 nats in 20 steps) and a layout that trains a wrong
// model drifts away from the one-GPU losses instead of hiding under noise.
//
// What is compared, and the tolerances (relative), with their reasons:
// - The gradients of the first forward and backward (before any update), per
//   tensor, against the one-GPU gradient's shard that the rank holds
//   (tensor_shards.h; with ZeRO-1, only the elements whose master copy the
//   rank owns: the others are another rank's to reduce): relative L2 error
//   below 1e-2 without tp, 3e-2 with tp. Without tp the ranks run the one-GPU
//   kernels on the same shapes; only fp32 sums change order (micro-batches
//   accumulated per rank then all-reduced, a tied wte's halves added after the
//   backward, flash attention's dQ atomics), ~1e-6, plus rare bf16 roundings
//   flipped by one ulp (2^-8) that propagate: the pipeline test's 1e-2. With tp
//   the row-parallel partial products are rounded to bf16 before they are
//   summed (Shoeybi et al. 2019's g operator in bf16): ~2^-9 per element per
//   layer, compounded over 24 layers' backward: the tensor-parallel test's 3e-2.
//   A wrong shard, a missing all-reduce or a lost micro-batch gives order 1.
// - The first forward's loss: 1e-5 without tp (the same per-token losses,
//   summed in the one-GPU order), 1e-2 with tp (the bf16 partial sums above).
// - The losses of the 20 steps (lr 1e-3, cosine to 1e-4): 2e-3 without tp,
//   2e-2 with tp, or three times what summing in another order does to the
//   one-GPU run by that step, whichever is larger. That second bound is
//   measured, not chosen: the same model on one GPU with micro-batches of 2 or
//   4 instead of 1 is the same arithmetic summed in another order (other GEMM
//   shapes, 4 or 2 accumulations instead of 8). It matters where training is
//   unstable: started from the trainer's own initialisation the small Llama's
//   counting task spiked (a 3-nat loss spike at step 13 that each layout, and
//   the mbs-2 one-GPU run, took at its own time) and drifted 0.3 nats under
//   pure fp32 reassociation (dp 2), so a fixed bound failed on noise; from
//   N(0, 0.02) both models train smoothly and GPT-350M's and the Llama's
//   layouts stayed within 3e-4 (H100, 2026-11-23).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "kernels/bf16.h"
#include "sim/core/layer_shape.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/preset_catalog.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/engine/tensor_shards.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

using Tensors = std::map<std::string, std::vector<float>>;

constexpr int kGlobalBatch = 8;
constexpr int kSteps = 20;
constexpr int kSeq = 1024;

sim::ModelConfig gpt_350m() {
  sim::ModelConfig m = sim::PresetCatalog(SEXTANT_TEST_CONFIG_DIR).model("gpt-350m", kSeq);
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  return m;
}

sim::ModelConfig small_llama() {
  sim::ModelConfig m = testing::small_model("parity-llama", true, 16, 4);
  m.num_layers = 8;
  m.hidden_size = 1024;
  m.ffn_hidden_size = 2816;
  m.kv_channels = 64;
  m.vocab_size = 32768;
  m.seq_length = kSeq;
  return m;
}

struct LayoutCase {
  bool llama;
  int tp, sp, pp, vpp, dp, zero;
  sim::Recompute recompute = sim::Recompute::kNone;
};

std::string case_name(const LayoutCase& c) {
  std::string s = c.llama ? "llama" : "gpt350m";
  if (c.tp > 1) s += "_tp" + std::to_string(c.tp);
  if (c.sp) s += "_sp";
  if (c.pp > 1) s += "_pp" + std::to_string(c.pp);
  if (c.vpp > 1) s += "_vpp" + std::to_string(c.vpp);
  if (c.dp > 1) s += "_dp" + std::to_string(c.dp);
  if (c.zero) s += "_zero1";
  if (c.recompute != sim::Recompute::kNone) s += "_recompute_" + std::string(sim::to_string(c.recompute));
  return s;
}

sim::ParallelLayout layout_of(const LayoutCase& c) {
  sim::ParallelLayout l;
  l.tp = c.tp;
  l.sp = c.sp != 0;
  l.pp = c.pp;
  l.vpp = c.vpp;
  l.schedule = c.vpp > 1 ? sim::Schedule::kInterleaved : sim::Schedule::kOneFOneB;
  l.dp = c.dp;
  l.zero = c.zero;
  l.recompute = c.recompute;
  l.mbs = 1;
  l.gbs = kGlobalBatch;
  return l;
}

TrainerOptions options_of() {
  TrainerOptions o = testing::three_step_options();  // lr 1e-3, cosine to 1e-4
  o.lr.decay_steps = kSteps;
  return o;
}

/// Each sequence counts from a random start by a random stride of 1-3, modulo
/// 1000; targets are the next tokens.
testing::Batch counting_batch(std::mt19937_64& rng, int sequences, int seq) {
  std::uniform_int_distribution<int> start(0, 999), stride(1, 3);
  testing::Batch b;
  for (int s = 0; s < sequences; ++s) {
    const int first = start(rng), step = stride(rng);
    for (int i = 0; i < seq; ++i) {
      b.inputs.push_back((first + i * step) % 1000);
      b.targets.push_back((first + (i + 1) * step) % 1000);
    }
  }
  return b;
}

struct RunResult {
  int tp_rank = 0, stage = 0;
  std::vector<double> losses;  // the first forward_backward, then steps 1..kSteps
  Tensors gradients;           // of the first forward_backward
  Tensors masters;             // initial fp32 masters (NaN where another ZeRO-1 rank owns them)
};

/// `start`: the weights to set, or null to keep the trainer's own (drawn from
/// the stream of each tensor's index in the whole model, as one GPU draws them).
void run(Trainer& trainer, const Tensors* start, const std::vector<testing::Batch>& batches, RunResult& out) {
  const std::vector<std::string> names = trainer.tensor_names();
  if (start != nullptr)
    for (const std::string& name : names) trainer.set_parameter(name, start->at(name));
  for (const std::string& name : names) out.masters[name] = trainer.master_parameter(name);
  out.losses.push_back(trainer.forward_backward(batches[0].inputs, batches[0].targets));
  for (const std::string& name : names) out.gradients[name] = trainer.gradient(name);
  for (const testing::Batch& b : batches) out.losses.push_back(trainer.step(b.inputs, b.targets).loss);
}

/// One model's start: the one-GPU trainer's initial weights, the batches, and
/// the one-GPU run on them — computed once per model.
struct Reference {
  sim::ModelConfig model;
  TransformerShape one;
  Tensors weights;
  std::vector<testing::Batch> batches;
  RunResult single;
  /// How far summing in another order alone moves the one-GPU losses: the
  /// same model, weights and batches on one GPU with micro-batches of 2 and of 4
  /// (other GEMM shapes, the gradient accumulated over 4 or 2 micro-batches
  /// instead of 8), as the relative difference to `single` at each step: the
  /// larger of the two, and the running maximum over the steps so far.
  std::vector<double> reordering;
};

const Reference& reference(bool llama, std::mt19937_64& rng) {
  static std::map<bool, std::unique_ptr<Reference>> cache;
  std::unique_ptr<Reference>& r = cache[llama];
  if (r) return *r;
  r = std::make_unique<Reference>();
  r->model = llama ? small_llama() : gpt_350m();
  const sim::ParallelLayout one_gpu = testing::one_gpu_layout(1, kGlobalBatch);
  r->one = transformer_shape_of(r->model, one_gpu);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const ParameterLayout whole(r->one);
  for (const ParameterTensor& t : whole.tensors()) {
    std::vector<float>& w = r->weights[t.name];
    w.reserve(t.elements());
    const bool gain = t.name.find("gamma") != std::string::npos;
    for (std::size_t i = 0; i < t.elements(); ++i)
      w.push_back(gain ? 1.0f : kernels::to_float(kernels::from_float(normal(rng))));
  }
  for (int i = 0; i < kSteps; ++i) r->batches.push_back(counting_batch(rng, kGlobalBatch, kSeq));
  const TrainerOptions options = options_of();
  {
    Trainer trainer(r->model, one_gpu, options);
    run(trainer, &r->weights, r->batches, r->single);
  }
  r->reordering.assign(r->single.losses.size(), 0.0);
  for (int micro_batch : {2, 4}) {
    Trainer trainer(r->model, testing::one_gpu_layout(micro_batch, kGlobalBatch), options);
    RunResult reordered;
    run(trainer, &r->weights, r->batches, reordered);
    double most = 0;
    for (std::size_t i = 0; i < r->single.losses.size(); ++i) {
      most = std::max(most, std::abs(reordered.losses[i] - r->single.losses[i]) / r->single.losses[i]);
      r->reordering[i] = std::max(r->reordering[i], most);
    }
  }
  return *r;
}

class LayoutParityTest : public kernels::testing::GpuTestWithParam<LayoutCase> {};

TEST_P(LayoutParityTest, TrainsAsOneGpuDoes) {
  const LayoutCase c = GetParam();
  const Reference& ref = reference(c.llama, rng());
  const sim::ParallelLayout layout = layout_of(c);
  ASSERT_EQ(sim::padded_vocab_size(ref.model.vocab_size, c.tp), ref.model.vocab_size);
  ASSERT_EQ(sim::check_pipeline_split(ref.model, layout), sim::SplitProblem::kNone);
  const TransformerShape part = transformer_shape_of(ref.model, layout);
  const TrainerOptions options = options_of();
  const int world = c.tp * c.pp * c.dp;
  std::vector<RunResult> ranks(static_cast<std::size_t>(world));
  comm::testing::run_in_process(
      world,
      [&](int r, comm::Communicator& w) {
        const comm::ParallelGroups groups = comm::make_parallel_groups(w, layout, w.stream());
        RunResult& out = ranks[static_cast<std::size_t>(r)];
        out.tp_rank = groups.tp->rank();
        out.stage = groups.pp->rank();
        auto shards_for = [&](const std::vector<std::string>& names) {
          Tensors shards;
          for (const std::string& name : names)
            shards[name] = testing::shard_of(name, ref.weights.at(name), ref.one, part, out.tp_rank, c.tp);
          return shards;
        };
        Trainer trainer(ref.model, layout, options, groups);
        const Tensors shards = shards_for(trainer.tensor_names());
        run(trainer, &shards, ref.batches, out);
      },
      std::chrono::minutes(5));

  const bool exact_forward = c.tp == 1;
  const double first_tolerance = exact_forward ? 1e-5 : 1e-2;
  const double step_tolerance = exact_forward ? 2e-3 : 2e-2;
  const double gradient_tolerance = exact_forward ? 1e-2 : 3e-2;
  double worst_gradient = 0, worst_loss = 0;
  std::string worst_name;
  // ZeRO-1: per tensor, the elements of tp rank 0's shard whose master some dp
  // rank holds, and the shard's size.
  std::map<std::pair<int, std::string>, std::size_t> owned, shard_size;
  for (const RunResult& got : ranks) {
    ASSERT_EQ(got.losses.size(), ref.single.losses.size());
    EXPECT_NEAR(got.losses[0], ref.single.losses[0], first_tolerance * ref.single.losses[0]) << "first forward";
    for (std::size_t s = 1; s < got.losses.size(); ++s) {
      const double tolerance = std::max(step_tolerance, 3 * ref.reordering[s]);
      EXPECT_NEAR(got.losses[s], ref.single.losses[s], tolerance * ref.single.losses[s]) << "step " << s;
      worst_loss = std::max(worst_loss, std::abs(got.losses[s] - ref.single.losses[s]) / ref.single.losses[s]);
    }
    for (const auto& [name, gradient] : got.gradients) {
      const std::vector<float> want =
          testing::shard_of(name, ref.single.gradients.at(name), ref.one, part, got.tp_rank, c.tp);
      ASSERT_EQ(gradient.size(), want.size()) << name;
      std::vector<float> mine, theirs;  // the elements this rank's gradient holds the group's sum of
      const std::vector<float>& master = got.masters.at(name);
      for (std::size_t i = 0; i < want.size(); ++i)
        if (!c.zero || !std::isnan(master[i])) {
          mine.push_back(gradient[i]);
          theirs.push_back(want[i]);
        }
      if (c.zero && got.tp_rank == 0) {
        owned[{got.stage, name}] += mine.size();
        shard_size[{got.stage, name}] = want.size();
      }
      if (mine.empty()) continue;
      const double error = testing::relative_l2_error(mine, theirs);
      EXPECT_LT(error, gradient_tolerance) << name << " on stage " << got.stage << ", tp rank " << got.tp_rank;
      if (error > worst_gradient) {
        worst_gradient = error;
        worst_name = name;
      }
    }
  }
  // ZeRO-1: the dp ranks own every element of every tensor between them, once.
  for (const auto& [at, count] : owned) EXPECT_EQ(count, shard_size.at(at)) << at.second << " on stage " << at.first;
  if (c.zero) {
    EXPECT_FALSE(owned.empty());
  }
  std::cout << "  " << case_name(c) << ": loss first forward one GPU " << ref.single.losses[0] << ", layout "
            << ranks[0].losses[0] << "; step " << kSteps << " " << ref.single.losses.back() << " vs "
            << ranks[0].losses.back() << "; worst step loss difference " << worst_loss
            << " (one GPU with micro-batches of 2 or 4: " << ref.reordering.back()
            << "); worst gradient relative L2 error " << worst_gradient << " (" << worst_name << ")\n";
}

std::vector<LayoutCase> cases() {
  std::vector<LayoutCase> all;
  for (bool llama : {false, true})
    for (LayoutCase c : {LayoutCase{false, 2, 0, 1, 1, 1, 0}, LayoutCase{false, 2, 1, 1, 1, 1, 0},
                         LayoutCase{false, 4, 1, 1, 1, 1, 0}, LayoutCase{false, 1, 0, 2, 1, 1, 0},
                         LayoutCase{false, 1, 0, 4, 2, 1, 0}, LayoutCase{false, 1, 0, 1, 1, 2, 0},
                         LayoutCase{false, 1, 0, 1, 1, 2, 1}, LayoutCase{false, 2, 0, 2, 1, 2, 0},
                         LayoutCase{false, 2, 1, 2, 1, 2, 0}, LayoutCase{false, 2, 0, 1, 1, 2, 1},
                         LayoutCase{false, 2, 0, 2, 1, 2, 1},
                         // recomputation beside them: selective under tp + sp, full under everything
                         LayoutCase{false, 2, 1, 1, 1, 1, 0, sim::Recompute::kSelective},
                         LayoutCase{false, 2, 1, 2, 1, 2, 1, sim::Recompute::kFull}}) {
      c.llama = llama;
      all.push_back(c);
    }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutParityTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<LayoutCase>& info) { return case_name(info.param); });

}  // namespace
}  // namespace sextant::engine
