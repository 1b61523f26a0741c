// Tensor parallelism in the whole model on one GPU: tp trainers on the
// in-process communicator (tp threads) — and 2·tp, tp x dp = 2 — each holding
// 1/tp of the heads, the MLP (QKV and fc1 column-parallel, proj and fc2
// row-parallel) and the padded vocabulary (embedding and cross entropy
// vocabulary-parallel), with and without sequence parallelism (the residual
// stream and norms on 1/tp of the tokens), against one trainer holding all of
// it, from the same weights (the one-rank weights, sharded). Skips without a
// GPU (fails instead under SEXTANT_REQUIRE_GPU=1).
//
// The vocabulary (160) is padded as Megatron pads it, to a multiple of 128·tp
// (256 at tp = 2, 512 at tp = 4: sim::padded_vocab_size); the one-rank model
// is given the padded vocabulary, whose extra rows take part in the softmax
// like any other, so both runs are the same function.
//
// Tolerances, and why: the ranks round to bf16 where one rank does not — each
// row-parallel output is tp partial products rounded to bf16 and summed
// (2^-9 relative each), under sp rounded again before the residual is added,
// and the QKV and fc1 input gradients likewise — and their GEMMs have other
// shapes (other cuBLASLt algorithms, other fp32 summation orders). That is
// the same kind and size of error as the engine's against a double-precision
// model, which trainer_test.cc bounds at 1e-2 relative for the loss and 3e-2
// relative L2 per gradient tensor (measured 0.3-1 %); the same bounds here,
// and 1e-2 for the losses after 1, 2 and 3 AdamW updates. A shard taken from
// the wrong rows or columns, a missing collective, a bias or position table
// counted twice, a vocabulary row looked up by the wrong rank or a partial
// norm gradient not summed over tp gives errors of order 1 (a norm gain's
// gradient from half the tokens is off by ~50 %).
// tp_comm_overlap (sp only): the same layouts with the sequence-parallel
// all-gathers and reduce-scatters pipelined with the GEMMs in tp chunks
// (engine/tensor_parallel/chunked_collectives.h) must train as the same layout
// without it does. The transfers move the same bytes, the chunked
// reduce-scatter adds the ranks' partials in rank order with fp32
// accumulation rounded once (the in-process communicator's own arithmetic),
// and the backward's overlaps only reorder independent work: all of that is
// exact. What may differ is each GEMM run on T/tp rows instead of T (QKV,
// proj, fc1 and fc2 forward, proj's and fc2's input gradient):
// cuBLASLt may pick another algorithm for the smaller problem, whose fp32
// summation order over k can flip the last bf16 bit of some outputs (2^-8
// relative), which then propagates. So overlap on vs off: losses within 2e-3
// relative (before and after 3 AdamW steps) and gradients within 1e-2
// relative L2 — 3-5x tighter than against one rank above; a chunk multiplied
// from the wrong rows, sent to the wrong owner, summed twice or not at all
// gives errors of order 1 in the gradients of every tensor below it. The
// number of gradient values that differ at all is printed (0 when the
// algorithms agree).
// Replicated tensors get bit-identical gradients on every rank (the
// all-reduces give all the same sum, and everything after it is the same
// arithmetic), so their weights stay equal: checked exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/trainer.h"
#include "kernels/bf16.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/engine/tensor_shards.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

// GPT-350M-like (LayerNorm, GELU, learned positions, biases, tied
// embeddings): hidden 256, 4 heads of 64, ffn 1024. Llama: RMSNorm, SwiGLU of
// 512, RoPE, untied, 8 query heads in 4 groups (q width 512 > hidden 256).
// Both split 4 ways: at tp = 4 one GPT head, two Llama heads and one group per rank.
sim::ModelConfig small_model(bool llama) {
  sim::ModelConfig m =
      llama ? testing::small_model("tp-llama", true, 8, 4) : testing::small_model("tp-gpt", false, 4, 4);
  m.hidden_size = 256;
  m.ffn_hidden_size = llama ? 512 : 1024;
  return m;
}

using testing::relative_l2_error;

// Rank r's shard of a one-rank tensor (tests/engine/tensor_shards.h).
std::vector<float> shard_of(const std::string& name, const std::vector<float>& full,
                            const TransformerShape& one, const TransformerShape& part, int rank) {
  return testing::shard_of(name, full, one, part, rank, part.tp);
}

struct RunResult {
  int tp_rank = 0;
  std::vector<double> losses;  // forward_backward, then steps 1-3
  std::map<std::string, std::vector<float>> gradients, weights;
};

void run(Trainer& trainer, const std::map<std::string, std::vector<float>>& start,
         const std::vector<testing::Batch>& batches, RunResult& out) {
  for (const auto& [name, values] : start) trainer.set_parameter(name, values);
  out.losses.push_back(trainer.forward_backward(batches[0].inputs, batches[0].targets));
  for (const std::string& name : trainer.tensor_names()) out.gradients[name] = trainer.gradient(name);
  for (const testing::Batch& b : batches) out.losses.push_back(trainer.step(b.inputs, b.targets).loss);
  for (const std::string& name : trainer.tensor_names()) out.weights[name] = trainer.weight(name);
}

struct ParallelCase {
  bool llama;
  int tp;
  bool sp;
  int dp;  // data-parallel ranks beside tp: the world is tp·dp ranks
  bool overlap = false;  // tp_comm_overlap (needs sp)
};

class TensorParallelTrainerTest : public kernels::testing::GpuTestWithParam<ParallelCase> {};

// tp = 2 and 4, with and without sp, alone and beside dp = 2 (groups split
// from one world in the order tp-dp, each dp rank running 2 of the 4
// micro-batches).
TEST_P(TensorParallelTrainerTest, RanksTrainAsOneRankDoes) {
  const sim::ModelConfig model = small_model(GetParam().llama);
  const int tp = GetParam().tp;
  const int dp = GetParam().dp;
  sim::ParallelLayout layout;
  layout.tp = tp;
  layout.sp = GetParam().sp;
  layout.dp = dp;
  layout.mbs = 1;
  layout.gbs = 4;
  layout.tp_comm_overlap = GetParam().overlap;
  const TransformerShape part = transformer_shape_of(model, layout);
  // The one-rank model has the padded vocabulary: 160 -> 128·tp·ceil(160 / (128·tp)).
  sim::ModelConfig padded = model;
  padded.vocab_size = tp == 2 ? 256 : 512;
  const sim::ParallelLayout one_rank = testing::one_gpu_layout(1, 4);
  const TransformerShape one = transformer_shape_of(padded, one_rank);
  ASSERT_TRUE(transformer_shape_problems(one, padded).empty());
  ASSERT_TRUE(transformer_shape_problems(part, model).empty());
  ASSERT_EQ(part.heads * tp, one.heads);
  ASSERT_EQ(part.ffn_hidden * tp, one.ffn_hidden);
  ASSERT_EQ(part.vocab, 128);  // 256 / 2 or 512 / 4 rows per rank
  ASSERT_EQ(part.sequence_parallel, GetParam().sp);
  ASSERT_EQ(part.tp_comm_overlap, GetParam().overlap);
  ASSERT_EQ(part.norm_tokens(), GetParam().sp ? 48 / tp : 48);
  const TrainerOptions options = testing::three_step_options();

  // Weights N(0, 0.05), rounded to bf16 so both runs start from the same numbers.
  std::map<std::string, std::vector<float>> weights;
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const ParameterLayout one_layout(one);
  for (const ParameterTensor& t : one_layout.tensors()) {
    std::vector<float>& w = weights[t.name];
    for (std::size_t i = 0; i < t.elements(); ++i)
      w.push_back(t.name.find("gamma") != std::string::npos ? 1.0f
                                                             : kernels::to_float(kernels::from_float(normal(rng()))));
  }
  std::vector<testing::Batch> batches;  // tokens of the real vocabulary only
  for (int i = 0; i < 3; ++i)
    batches.push_back(testing::random_batch(rng(), 4, one.seq, static_cast<int>(model.vocab_size)));

  RunResult single;
  {
    Trainer trainer(padded, one_rank, options);
    run(trainer, weights, batches, single);
  }
  std::vector<std::size_t> activation_bytes(static_cast<std::size_t>(tp * dp));
  // Every rank of `l` trains from the sharded weights; results in world-rank order.
  auto run_ranks = [&](const sim::ParallelLayout& l) {
    std::vector<RunResult> results(static_cast<std::size_t>(tp * dp));
    comm::testing::run_in_process(tp * dp, [&](int r, comm::Communicator& world) {
      const comm::ParallelGroups groups = comm::make_parallel_groups(world, l, world.stream());
      RunResult& out = results[static_cast<std::size_t>(r)];
      out.tp_rank = groups.tp->rank();
      std::map<std::string, std::vector<float>> shards;
      for (const auto& [name, full] : weights) shards[name] = shard_of(name, full, one, part, out.tp_rank);
      Trainer trainer(model, l, options, groups);
      activation_bytes[static_cast<std::size_t>(r)] = trainer.memory_plan().bytes_by_category()[static_cast<std::size_t>(MemoryCategory::kActivations)];
      run(trainer, shards, batches, out);
    });
    return results;
  };
  const std::vector<RunResult> ranks = run_ranks(layout);

  double worst = 0;
  std::string worst_name;
  for (const RunResult& got : ranks) {
    const int r = got.tp_rank;
    EXPECT_NEAR(got.losses[0], single.losses[0], 1e-2 * single.losses[0]);
    for (std::size_t s = 1; s < got.losses.size(); ++s)
      EXPECT_NEAR(got.losses[s], single.losses[s], 1e-2 * single.losses[s]) << "step " << s;
    for (const auto& [name, gradient] : single.gradients) {
      const std::vector<float> want = shard_of(name, gradient, one, part, r);
      ASSERT_EQ(got.gradients.at(name).size(), want.size()) << name;
      const double error = relative_l2_error(got.gradients.at(name), want);
      EXPECT_LT(error, 3e-2) << name << " on rank " << r;
      if (error > worst) {
        worst = error;
        worst_name = name;
      }
    }
  }
  const ParameterLayout part_layout(part);
  for (const ParameterTensor& t : part_layout.tensors()) {
    for (const RunResult& got : ranks) {
      if (!t.split_over_tp) {
        EXPECT_EQ(got.weights.at(t.name), ranks[0].weights.at(t.name)) << t.name;
      } else if (got.tp_rank == ranks[0].tp_rank) {  // the same shard on another dp rank
        EXPECT_EQ(got.weights.at(t.name), ranks[0].weights.at(t.name)) << t.name;
      }
    }
  }
  std::cout << "  " << model.name << " tp=" << tp << (GetParam().sp ? " sp" : "") << " dp=" << dp
            << ": activation buffers " << activation_bytes[0] / 1024 << " KiB per rank; loss one rank "
            << single.losses[0] << ", here "
            << ranks[0].losses[0]
            << "; after 3 steps " << single.losses[3] << " vs " << ranks[0].losses[3]
            << "; worst gradient relative L2 error " << worst << " (" << worst_name << ")\n";

  if (!GetParam().overlap) return;
  // The same layout without the overlap, rank by rank (bounds: the header).
  sim::ParallelLayout serial = layout;
  serial.tp_comm_overlap = false;
  const std::vector<RunResult> reference = run_ranks(serial);
  double worst_vs_serial = 0;
  std::size_t values = 0, differing = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RunResult& got = ranks[i];
    const RunResult& want = reference[i];
    ASSERT_EQ(got.tp_rank, want.tp_rank);
    for (std::size_t s = 0; s < got.losses.size(); ++s)
      EXPECT_NEAR(got.losses[s], want.losses[s], 2e-3 * want.losses[s]) << "rank " << i << ", step " << s;
    for (const auto& [name, gradient] : want.gradients) {
      const std::vector<float>& g = got.gradients.at(name);
      ASSERT_EQ(g.size(), gradient.size()) << name;
      const double error = relative_l2_error(g, gradient);
      EXPECT_LT(error, 1e-2) << name << " on rank " << i;
      worst_vs_serial = std::max(worst_vs_serial, error);
      values += g.size();
      for (std::size_t k = 0; k < g.size(); ++k) differing += g[k] != gradient[k] ? 1 : 0;
    }
  }
  std::cout << "  tp_comm_overlap vs serial collectives: loss " << reference[0].losses[0] << " vs "
            << ranks[0].losses[0] << ", after 3 steps " << reference[0].losses[3] << " vs " << ranks[0].losses[3]
            << "; worst gradient relative L2 difference " << worst_vs_serial << "; " << differing << " of "
            << values << " gradient values differ at all\n";
}

INSTANTIATE_TEST_SUITE_P(GptAndLlama, TensorParallelTrainerTest,
                         ::testing::Values(ParallelCase{false, 2, false, 1}, ParallelCase{true, 2, false, 1},
                                           ParallelCase{false, 2, true, 1}, ParallelCase{true, 2, true, 1},
                                           ParallelCase{false, 4, true, 1}, ParallelCase{true, 4, true, 1},
                                           ParallelCase{false, 2, false, 2}, ParallelCase{true, 2, false, 2},
                                           ParallelCase{false, 2, true, 2}, ParallelCase{true, 2, true, 2},
                                           ParallelCase{false, 2, true, 1, true}, ParallelCase{true, 2, true, 1, true},
                                           ParallelCase{false, 4, true, 1, true}, ParallelCase{true, 4, true, 1, true},
                                           ParallelCase{false, 2, true, 2, true}),
                         [](const ::testing::TestParamInfo<ParallelCase>& info) {
                           return std::string(info.param.llama ? "llama" : "gpt") + "_tp" +
                                  std::to_string(info.param.tp) + (info.param.sp ? "_sp" : "") + "_dp" +
                                  std::to_string(info.param.dp) + (info.param.overlap ? "_overlap" : "");
                         });

// Sequence parallelism stores the residual stream and the norms' outputs on
// 1/tp of the tokens: the activation buffers of a tp = 2 rank shrink. GPT, 2
// layers, T = 48 tokens, h = 256, bf16 (the arena plan's bytes, before
// alignment): per layer input, norm1, mid and norm2 go from 48·256·2 = 24576 B
// to 12288 B each (4·12288 saved) and the four statistics from 48 to 24 floats
// (4·96 B saved); the final norm's input and the residual stream's gradient
// save 12288 B each, the final norm's statistics 2·96 B. sp adds the gathered
// norm output and residual gradient (2·24576 B) and the final norm's and the
// scattered gradient's shards (2·12288 B). Net: 2·(49152 + 384) + 2·12288 +
// 192 − 73728 = 50112 B less. Checked on the arena plans alone (no step runs).
class SequenceParallelMemoryTest : public kernels::testing::GpuTest {};

TEST_F(SequenceParallelMemoryTest, ShrinksActivations) {
  const sim::ModelConfig model = small_model(false);
  std::size_t bytes[2] = {};
  for (const bool sp : {false, true}) {
    sim::ParallelLayout layout;
    layout.tp = 2;
    layout.sp = sp;
    layout.mbs = 1;
    layout.gbs = 1;
    comm::testing::run_in_process(2, [&](int r, comm::Communicator& world) {
      const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
      Trainer trainer(model, layout, testing::three_step_options(), groups);
      if (r == 0) bytes[sp ? 1 : 0] = trainer.memory_plan().bytes_by_category()[static_cast<std::size_t>(MemoryCategory::kActivations)];
    });
  }
  EXPECT_EQ(bytes[0] - bytes[1], 50112u);
  std::cout << "  activation buffers per rank: tp=2 " << bytes[0] << " B, tp=2 sp " << bytes[1] << " B\n";
}

// Initial weights do not depend on the layout (trainer.h): with the same seed,
// every tensor a tp = 2 rank draws is exactly its shard (tensor_shards.h) of
// the one-GPU trainer's whole tensor, and every tensor a pp = 2 stage draws
// (the tied wte's last-stage copy too) is the one-GPU tensor, bit for bit.
// Ranks drawing from streams of their own would share no value with one GPU.
// The vocabulary is 256, which tp = 1 and tp = 2 pad alike (160 pads to 256
// at tp = 2 only: another whole table). No step runs.
class LayoutIndependentInitTest : public kernels::testing::GpuTestWithParam<bool> {};

TEST_P(LayoutIndependentInitTest, TpShardsAndPipelineStagesDrawTheOneGpuWeights) {
  sim::ModelConfig model =  // Llama: 4 query heads over 2 key/value groups (GQA)
      GetParam() ? testing::small_model("init-llama", true, 4, 2) : testing::small_model("init-gpt", false, 2, 2);
  model.vocab_size = 256;
  TrainerOptions options = testing::three_step_options();
  options.seed = rng()();
  const sim::ParallelLayout one_gpu = testing::one_gpu_layout(1, 2);
  std::map<std::string, std::vector<float>> whole;
  TransformerShape one;
  {
    const Trainer trainer(model, one_gpu, options);
    one = trainer.shape();
    for (const std::string& name : trainer.tensor_names()) whole[name] = trainer.master_parameter(name);
  }
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  // Each rank's masters, by tensor name, drawn by a rank of `layout` (2 ranks).
  struct Drawn {
    int tp_rank = 0;
    TransformerShape shape;
    std::map<std::string, std::vector<float>> masters;
  };
  auto draw = [&](const sim::ParallelLayout& layout) {
    std::vector<Drawn> ranks(2);
    comm::testing::run_in_process(2, [&](int r, comm::Communicator& world) {
      const comm::ParallelGroups groups = comm::make_parallel_groups(world, layout, world.stream());
      const Trainer trainer(model, layout, options, groups);
      Drawn& out = ranks[static_cast<std::size_t>(r)];
      out.tp_rank = groups.tp->rank();
      out.shape = trainer.shape();
      for (const std::string& name : trainer.tensor_names()) out.masters[name] = trainer.master_parameter(name);
    });
    return ranks;
  };

  sim::ParallelLayout tp2 = one_gpu;
  tp2.tp = 2;
  std::size_t shards = 0;
  for (const Drawn& rank : draw(tp2)) {
    EXPECT_EQ(rank.masters.size(), whole.size()) << "tp rank " << rank.tp_rank;
    for (const auto& [name, got] : rank.masters) {
      EXPECT_TRUE(same_bits(got, testing::shard_of(name, whole.at(name), one, rank.shape, rank.tp_rank, 2)))
          << name << " on tp rank " << rank.tp_rank << " is not its shard of the one-GPU tensor";
      ++shards;
    }
  }

  sim::ParallelLayout pp2 = one_gpu;
  pp2.pp = 2;
  std::map<std::string, int> held;
  for (const Drawn& stage : draw(pp2))
    for (const auto& [name, got] : stage.masters) {
      EXPECT_TRUE(same_bits(got, whole.at(name))) << name << " on a pipeline stage is not the one-GPU tensor";
      ++held[name];
    }
  for (const auto& [name, values] : whole) EXPECT_EQ(held[name], name == "wte" && model.tie_embeddings ? 2 : 1) << name;
  std::cout << "  " << model.name << ": " << whole.size() << " tensors; " << shards
            << " tp = 2 shards and the pp = 2 stages' tensors equal the one-GPU draw bit for bit\n";
}

INSTANTIATE_TEST_SUITE_P(GptAndLlama, LayoutIndependentInitTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "llama" : "gpt"; });

}  // namespace
}  // namespace sextant::engine
