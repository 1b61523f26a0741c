// Context parallelism (issue 26) trains as one GPU does: a small Llama (RoPE,
// GQA 4:2) and a small GPT (learned positions, tied embeddings), sequences of
// 512 tokens, 4 optimizer steps of 4 sequences (mbs 1) from the same weights
// and data, the layout's ranks as threads on the in-process communicator
// against one Trainer holding the whole model and whole sequences. Layouts:
// cp 2, cp 4 (dp 1), cp 2 x dp 2, tp 2 + sp x cp 2, cp 2 x dp 2 with ZeRO-1,
// cp 2 x pp 2; each with both context-parallel attention cores
// (cp_comm_type all_gather and p2p, the K/V ring). Skips without a GPU (fails
// instead under SEXTANT_REQUIRE_GPU=1).
//
// It needs the whole of context parallelism: the trainer's split of each
// sequence into 2·cp chunks (rank r holds chunks r and 2·cp−1−r), the
// positions of RoPE and of the position table, the 1/(gbs·S) loss scale, the
// gradients summed over dp x cp, and the attention core: the all-gather (K/V
// gathered over cp, flash attention with kv_seq) or the ring (K/V passed
// around cp, partial results merged by their log-sum-exps, dK/dV carried home).
//
// What is compared, and the tolerances (relative) — those of the layout parity
// test (tests/engine/parity/layout_parity_test.cc) for layouts that change the
// forward's arithmetic, as tp does: the all-gather core runs each chunk's
// queries against its visible keys in a call of its own (other tile
// boundaries, so other fp32 sums of the softmax), and the K/V gradients of a
// rank's two chunks are summed in fp32 over cp before their bf16 rounding, as
// tp's row-parallel partial products are; the ring splits the keys further
// (one call per chunk and step, merged in fp32 from bf16 partials, dQ summed
// in fp32 over the steps), of the same order:
// - the first forward's loss: 1e-2;
// - the gradients of the first forward and backward, per tensor, against the
//   one-GPU gradient (the rank's tp shard; under ZeRO-1 only the elements whose
//   master copy the rank owns): relative L2 error below 3e-2;
// - the losses and gradient norms of the 4 steps: 2e-2.
// A rank holding the wrong chunks, a position off by a chunk, a loss scale of
// 1/(gbs·S/cp) (cp times too large a gradient), or gradients not summed over
// cp all give errors of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/engine/tensor_shards.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

using Tensors = std::map<std::string, std::vector<float>>;

constexpr int kGlobalBatch = 4;
constexpr int kSteps = 4;
constexpr int kSeq = 512;
constexpr int kVocab = 256;  // a multiple of 128·tp: no layout pads it

// Llama: RoPE, 4 query heads over 2 key/value groups (GQA); GPT: learned
// positions (a 512-row table), 2 heads, tied embeddings.
sim::ModelConfig model_of(bool llama) {
  sim::ModelConfig m = llama ? testing::small_model("cp-llama", true, 4, 2) : testing::small_model("cp-gpt", false, 2, 2);
  m.seq_length = kSeq;
  m.vocab_size = kVocab;
  return m;
}

struct CpCase {
  bool llama;
  int tp, sp, cp, pp, dp, zero;
  sim::CpCommType exchange = sim::CpCommType::kAllGather;
};

std::string case_name(const CpCase& c) {
  std::string s = c.llama ? "llama" : "gpt";
  if (c.tp > 1) s += "_tp" + std::to_string(c.tp);
  if (c.sp) s += "_sp";
  s += "_cp" + std::to_string(c.cp);
  if (c.pp > 1) s += "_pp" + std::to_string(c.pp);
  if (c.dp > 1) s += "_dp" + std::to_string(c.dp);
  if (c.zero) s += "_zero1";
  if (c.exchange == sim::CpCommType::kP2p) s += "_p2p";  // the all-gather's names as before the ring
  return s;
}

sim::ParallelLayout layout_of(const CpCase& c) {
  sim::ParallelLayout l;
  l.tp = c.tp;
  l.sp = c.sp != 0;
  l.cp = c.cp;
  l.pp = c.pp;
  l.dp = c.dp;
  l.zero = c.zero;
  l.cp_comm_type = c.exchange;
  l.mbs = 1;
  l.gbs = kGlobalBatch;
  return l;
}

TrainerOptions options_of() {
  TrainerOptions o = testing::three_step_options();
  o.lr.decay_steps = kSteps;
  return o;
}

/// Each sequence counts from a random start by a random stride of 1-3 modulo
/// the vocabulary (learnable, so a wrong model drifts); targets are the next tokens.
testing::Batch counting_batch(std::mt19937_64& rng, int sequences) {
  std::uniform_int_distribution<int> start(0, kVocab - 1), stride(1, 3);
  testing::Batch b;
  for (int s = 0; s < sequences; ++s) {
    const int first = start(rng), step = stride(rng);
    for (int i = 0; i < kSeq; ++i) {
      b.inputs.push_back((first + i * step) % kVocab);
      b.targets.push_back((first + (i + 1) * step) % kVocab);
    }
  }
  return b;
}

struct RunResult {
  int tp_rank = 0;
  std::vector<double> losses;      // the first forward_backward, then steps 1..kSteps
  std::vector<double> grad_norms;  // steps 1..kSteps
  Tensors gradients;               // of the first forward_backward
  Tensors masters;                 // initial fp32 masters (NaN where another ZeRO-1 rank owns them)
};

void run(Trainer& trainer, const Tensors& start, const std::vector<testing::Batch>& batches, RunResult& out) {
  const std::vector<std::string> names = trainer.tensor_names();
  for (const std::string& name : names) trainer.set_parameter(name, start.at(name));
  for (const std::string& name : names) out.masters[name] = trainer.master_parameter(name);
  out.losses.push_back(trainer.forward_backward(batches[0].inputs, batches[0].targets));
  for (const std::string& name : names) out.gradients[name] = trainer.gradient(name);
  for (const testing::Batch& b : batches) {
    const StepResult r = trainer.step(b.inputs, b.targets);
    out.losses.push_back(r.loss);
    out.grad_norms.push_back(r.grad_norm);
  }
}

/// One model's weights (N(0, 0.02) in bf16, gains 1), batches and one-GPU run, once per model.
struct Reference {
  sim::ModelConfig model;
  TransformerShape one;
  Tensors weights;
  std::vector<testing::Batch> batches;
  RunResult single;
};

const Reference& reference(bool llama, std::mt19937_64& rng) {
  // Cached only once complete, so a failed build is not reused by the next case.
  static std::map<bool, std::unique_ptr<Reference>> cache;
  if (const auto it = cache.find(llama); it != cache.end()) return *it->second;
  auto r = std::make_unique<Reference>();
  r->model = model_of(llama);
  const sim::ParallelLayout one_gpu = testing::one_gpu_layout(1, kGlobalBatch);
  r->one = transformer_shape_of(r->model, one_gpu);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const ParameterLayout whole(r->one);  // named: the loop reads its tensors
  for (const ParameterTensor& t : whole.tensors()) {
    std::vector<float>& w = r->weights[t.name];
    const bool gain = t.name.find("gamma") != std::string::npos;
    for (std::size_t i = 0; i < t.elements(); ++i)
      w.push_back(gain ? 1.0f : kernels::to_float(kernels::from_float(normal(rng))));
  }
  for (int i = 0; i < kSteps; ++i) r->batches.push_back(counting_batch(rng, kGlobalBatch));
  Trainer trainer(r->model, one_gpu, options_of());
  run(trainer, r->weights, r->batches, r->single);
  return *(cache[llama] = std::move(r));
}

class ContextParallelTrainerTest : public kernels::testing::GpuTestWithParam<CpCase> {};

TEST_P(ContextParallelTrainerTest, TrainsAsOneGpuDoes) {
  const CpCase c = GetParam();
  const Reference& ref = reference(c.llama, rng());
  const sim::ParallelLayout layout = layout_of(c);
  ASSERT_EQ(sim::padded_vocab_size(ref.model.vocab_size, c.tp), ref.model.vocab_size);
  ASSERT_EQ(sim::check_pipeline_split(ref.model, layout), sim::SplitProblem::kNone);
  const TransformerShape part = transformer_shape_of(ref.model, layout);
  ASSERT_EQ(part.seq * c.cp, kSeq);
  const int world = c.tp * c.cp * c.pp * c.dp;
  std::vector<RunResult> ranks(static_cast<std::size_t>(world));
  comm::testing::run_in_process(
      world,
      [&](int r, comm::Communicator& w) {
        const comm::ParallelGroups groups = comm::make_parallel_groups(w, layout, w.stream());
        RunResult& out = ranks[static_cast<std::size_t>(r)];
        out.tp_rank = groups.tp->rank();
        Trainer trainer(ref.model, layout, options_of(), groups);
        // The whole model's tensors' tp shards (every cp rank holds the same weights).
        Tensors shards;
        for (const std::string& name : trainer.tensor_names())
          shards[name] = testing::shard_of(name, ref.weights.at(name), ref.one, part, out.tp_rank, c.tp);
        run(trainer, shards, ref.batches, out);
      },
      std::chrono::minutes(5));

  constexpr double kFirstLoss = 1e-2, kStep = 2e-2, kGradient = 3e-2;
  double worst_gradient = 0, worst_loss = 0;
  std::string worst_name;
  for (const RunResult& got : ranks) {
    ASSERT_EQ(got.losses.size(), ref.single.losses.size());
    EXPECT_NEAR(got.losses[0], ref.single.losses[0], kFirstLoss * ref.single.losses[0]) << "first forward";
    for (std::size_t s = 1; s < got.losses.size(); ++s) {
      EXPECT_NEAR(got.losses[s], ref.single.losses[s], kStep * ref.single.losses[s]) << "step " << s;
      EXPECT_NEAR(got.grad_norms[s - 1], ref.single.grad_norms[s - 1], kStep * ref.single.grad_norms[s - 1])
          << "gradient norm of step " << s;
      worst_loss = std::max(worst_loss, std::abs(got.losses[s] - ref.single.losses[s]) / ref.single.losses[s]);
    }
    for (const auto& [name, gradient] : got.gradients) {
      const std::vector<float> want =
          testing::shard_of(name, ref.single.gradients.at(name), ref.one, part, got.tp_rank, c.tp);
      ASSERT_EQ(gradient.size(), want.size()) << name;
      std::vector<float> mine, theirs;  // the elements whose reduced gradient this rank holds
      const std::vector<float>& master = got.masters.at(name);
      for (std::size_t i = 0; i < want.size(); ++i)
        if (!c.zero || !std::isnan(master[i])) {
          mine.push_back(gradient[i]);
          theirs.push_back(want[i]);
        }
      if (mine.empty()) continue;
      const double error = testing::relative_l2_error(mine, theirs);
      EXPECT_LT(error, kGradient) << name << ", tp rank " << got.tp_rank;
      if (error > worst_gradient) {
        worst_gradient = error;
        worst_name = name;
      }
    }
  }
  std::cout << "  " << case_name(c) << ": first loss one GPU " << ref.single.losses[0] << ", layout "
            << ranks[0].losses[0] << "; step " << kSteps << " " << ref.single.losses.back() << " vs "
            << ranks[0].losses.back() << "; worst step loss difference " << worst_loss
            << "; worst gradient relative L2 error " << worst_gradient << " (" << worst_name << ")\n";
}

std::vector<CpCase> cases() {
  std::vector<CpCase> all;
  for (sim::CpCommType exchange : {sim::CpCommType::kAllGather, sim::CpCommType::kP2p})
    for (bool llama : {true, false})
      for (CpCase c : {CpCase{false, 1, 0, 2, 1, 1, 0}, CpCase{false, 1, 0, 4, 1, 1, 0},
                       CpCase{false, 1, 0, 2, 1, 2, 0}, CpCase{false, 2, 1, 2, 1, 1, 0},
                       CpCase{false, 1, 0, 2, 1, 2, 1}, CpCase{false, 1, 0, 2, 2, 1, 0}}) {
        c.llama = llama;
        c.exchange = exchange;
        all.push_back(c);
      }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ContextParallelTrainerTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<CpCase>& info) { return case_name(info.param); });

}  // namespace
}  // namespace sextant::engine
