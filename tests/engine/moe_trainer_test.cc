// The engine's MoE layer (engine/transformer/moe_layer.h) trained on the GPU:
// against the dense MLP it must equal when every expert is that MLP, under full
// recomputation, learning a repeated batch with every routed token counted, and
// on data- and pipeline-parallel layouts through the in-process communicator
// against one GPU. (Against the double-precision CPU model: reference_moe_test.)
// Skips without a GPU (fails instead under SEXTANT_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
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

using testing::relative_l2_error;

// small_model's Llama (2 layers, hidden 128, 2 query heads over 1 KV head,
// sequence 48, vocabulary 160) with every MLP an MoE layer of SwiGLU experts.
sim::ModelConfig small_moe(int experts, int topk, int expert_ffn) {
  sim::ModelConfig m = testing::small_model("small-moe", true, 2, 1);
  m.moe = sim::MoeConfig{};
  m.moe->num_experts = experts;
  m.moe->router_topk = topk;
  m.moe->ffn_hidden_size = expert_ffn;
  return m;
}

// The sum over experts of a stacked (experts x block) tensor: one block.
std::vector<float> sum_over_experts(const std::vector<float>& stacked, int experts) {
  const std::size_t block = stacked.size() / static_cast<std::size_t>(experts);
  std::vector<float> sum(block, 0.0f);
  for (std::size_t e = 0; e < static_cast<std::size_t>(experts); ++e)
    for (std::size_t i = 0; i < block; ++i) sum[i] += stacked[e * block + i];
  return sum;
}

std::vector<float> repeated(const std::vector<float>& block, int times) {
  std::vector<float> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), block.begin(), block.end());
  return out;
}

using MoeTrainerTest = kernels::testing::GpuTest;

// With every expert equal to the dense MLP and the top-k weights renormalised
// (they sum to 1), an MoE layer computes the dense MLP whatever the router
// chooses: y = Σ_j w_j · mlp(x) = mlp(x). Each token's copies go to other
// experts with other row counts (4 experts, top-2, a random router), so the
// routing map, the permutation, the grouped GEMMs and the weighted sum all
// run as in training; the experts' weight gradients sum to the dense one's.
TEST_F(MoeTrainerTest, EqualExpertsComputeTheDenseMlp) {
  constexpr int kExperts = 4;
  const sim::ModelConfig dense = testing::small_model("small-dense", true, 2, 1);
  const sim::ModelConfig moe = small_moe(kExperts, 2, static_cast<int>(dense.ffn_hidden_size));
  TrainerOptions options = testing::three_step_options();
  options.moe.aux_loss_coeff = 0.0f;  // the router's only gradient is then the weights' (zero here)
  const sim::ParallelLayout layout = testing::one_gpu_layout(2, 2);
  Trainer a(dense, layout, options), b(moe, layout, options);
  for (const std::string& name : a.tensor_names()) {
    const std::vector<float> w = a.master_parameter(name);
    const auto fc = name.find("fc");
    if (fc == std::string::npos)
      b.set_parameter(name, w);
    else  // layers.<i>.fc1_weight -> layers.<i>.expert_fc1_weight, every expert the same
      b.set_parameter(name.substr(0, fc) + "expert_" + name.substr(fc), repeated(w, kExperts));
  }
  for (int layer = 0; layer < 2; ++layer) {
    const std::string name = "layers." + std::to_string(layer) + ".router_weight";
    b.set_parameter(name, kernels::testing::random_float(rng(), b.master_parameter(name).size(), 0.0, 0.5));
  }
  const testing::Batch batch = testing::random_batch(rng(), 2, 48, 160);
  const double dense_loss = a.forward_backward(batch.inputs, batch.targets);
  const double moe_loss = b.forward_backward(batch.inputs, batch.targets);
  // The MoE block rounds fc2's products to bf16 before the residual is added
  // (the dense one adds it in fc2's epilogue): one more rounding per layer.
  EXPECT_NEAR(moe_loss, dense_loss, 2e-3 * dense_loss);
  for (const std::string& name : a.tensor_names()) {
    const auto fc = name.find("fc");
    const std::vector<float> got =
        fc == std::string::npos ? b.gradient(name)
                                : sum_over_experts(b.gradient(name.substr(0, fc) + "expert_" + name.substr(fc)), kExperts);
    EXPECT_LT(relative_l2_error(got, a.gradient(name)), 2e-2) << name;
  }
  const transformer::MoeStatistics s = b.take_moe_statistics();
  ASSERT_EQ(s.expert_tokens.size(), 2u);
  for (const auto& layer : s.expert_tokens) {
    EXPECT_EQ(std::accumulate(layer.begin(), layer.end(), std::int64_t{0}), 2 * 48 * 2);  // tokens x top-k
    int used = 0;
    for (const std::int64_t n : layer) used += n > 0 ? 1 : 0;
    EXPECT_GE(used, 2) << "a random router spreads 96 tokens over more than one expert";
  }
}

TEST_F(MoeTrainerTest, FullRecomputationGivesTheSameLossAndGradients) {
  const sim::ModelConfig model = small_moe(8, 2, 64);
  const testing::Batch batch = testing::random_batch(rng(), 4, 48, 160);
  std::vector<std::vector<float>> gradients[2];
  double losses[2];
  transformer::MoeStatistics statistics[2];
  for (int i = 0; i < 2; ++i) {
    TrainerOptions options;
    options.tune_gemms = false;
    options.moe.z_loss_coeff = 1e-3f;
    Trainer trainer(model, testing::one_gpu_layout(2, 4, i == 0 ? sim::Recompute::kNone : sim::Recompute::kFull),
                    options);
    losses[i] = trainer.forward_backward(batch.inputs, batch.targets);
    for (const std::string& name : trainer.tensor_names()) gradients[i].push_back(trainer.gradient(name));
    statistics[i] = trainer.take_moe_statistics();
  }
  // The recomputed forward routes the same tokens the same way; only flash
  // attention's dQ atomics reorder sums (trainer_test.cc's reasoning).
  EXPECT_EQ(losses[0], losses[1]);
  for (std::size_t t = 0; t < gradients[0].size(); ++t)
    EXPECT_LT(relative_l2_error(gradients[1][t], gradients[0][t]), 1e-3) << "tensor " << t;
  // Recomputation's second routing is not counted again.
  EXPECT_EQ(statistics[0].expert_tokens, statistics[1].expert_tokens);
  EXPECT_EQ(statistics[1].layer_passes, 2 * 2);  // 2 layers x 2 micro-batches
  // A router near its initialisation is near uniform: the Switch loss (without
  // its coefficient) is N Σ f_i P_i ≈ 1 (kernels/moe_load_balancing.h).
  const double aux = statistics[1].aux_loss_sum / static_cast<double>(statistics[1].layer_passes);
  EXPECT_GT(aux, 0.95);
  EXPECT_LT(aux, 1.3);
}

TEST_F(MoeTrainerTest, LearnsARepeatedBatchAndCountsEveryRoutedToken) {
  const sim::ModelConfig model = small_moe(8, 2, 64);
  TrainerOptions options = testing::three_step_options();
  options.lr.decay_steps = 30;
  Trainer trainer(model, testing::one_gpu_layout(2, 4), options);
  const testing::Batch batch = testing::random_batch(rng(), 4, 48, 160);
  transformer::MoeStatistics s;
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    const StepResult r = trainer.step(batch.inputs, batch.targets);
    (i == 0 ? first : last) = r.loss;
    ASSERT_EQ(r.moe.layer_passes, 2 * 2) << "each step's own routing: 2 layers x 2 micro-batches";
    transformer::accumulate(s, r.moe);
  }
  EXPECT_NEAR(first, std::log(160.0), 0.2);
  EXPECT_LT(last, 0.6 * first);
  ASSERT_EQ(s.expert_tokens.size(), 2u);
  for (const auto& layer : s.expert_tokens) {
    EXPECT_EQ(std::accumulate(layer.begin(), layer.end(), std::int64_t{0}), 30LL * 4 * 48 * 2);
    EXPECT_GE(transformer::busiest_expert_load(layer), 1.0);
  }
  // Dropless, the experts' GEMMs run every routed pair (the rounding padding not counted).
  EXPECT_EQ(s.expert_rows, s.expert_tokens);
}

// Under a capacity (factor 1: ceil(96 tokens x top-2 / 8 experts) = 24 rows
// per expert and micro-batch) an expert's rows are the pairs it kept: at most
// 24 per pass, fewer in all than were routed where the routing is uneven; padded
// to capacity, exactly 24 per pass.
TEST_F(MoeTrainerTest, ExpertRowsAreThePairsKeptUnderACapacity) {
  const sim::ModelConfig model = small_moe(8, 2, 64);
  for (const bool padded : {false, true}) {
    TrainerOptions options = testing::three_step_options();
    options.moe.capacity_factor = 1.0;
    options.moe.pad_to_capacity = padded;
    Trainer trainer(model, testing::one_gpu_layout(2, 4), options);
    transformer::MoeStatistics s;
    for (int i = 0; i < 3; ++i) {
      const testing::Batch batch = testing::random_batch(rng(), 4, 48, 160);
      transformer::accumulate(s, trainer.step(batch.inputs, batch.targets).moe);
    }
    const std::int64_t passes = 3 * 2, capacity = 24;
    ASSERT_EQ(s.expert_rows.size(), 2u);
    for (std::size_t l = 0; l < 2; ++l) {
      std::int64_t rows = 0, routed = 0;
      for (std::size_t e = 0; e < 8; ++e) {
        if (padded) {
          EXPECT_EQ(s.expert_rows[l][e], passes * capacity) << "layer " << l << " expert " << e;
        } else {
          EXPECT_LE(s.expert_rows[l][e], std::min(s.expert_tokens[l][e], passes * capacity))
              << "layer " << l << " expert " << e;
        }
        rows += s.expert_rows[l][e];
        routed += s.expert_tokens[l][e];
      }
      EXPECT_EQ(routed, passes * 96 * 2);
      if (padded) EXPECT_EQ(rows, routed) << "8 x 24 = 192 = 96 x 2: padding fills what dropping took";
      if (!padded && *std::max_element(s.expert_tokens[l].begin(), s.expert_tokens[l].end()) > passes * capacity)
        EXPECT_LT(rows, routed) << "an expert over its capacity dropped pairs";
    }
  }
}

// Layouts through the in-process communicator against one GPU, the trainer's
// own (layout-independent) initial weights: dp 2 and dp 2 with ZeRO-1 sum the
// same micro-batches' gradients in another order; pp 2 puts one MoE layer on
// each stage; ep 2 and 4 send each token's rows to the rank of its experts and
// back (ep = dp: each expert's gradient whole on one rank; ep 2 of dp 4: summed
// over the expert-dp pair), with and without a capacity that drops tokens,
// and with ZeRO-1 (the experts' optimizer state sharded over the expert-dp
// group, the rest over dp; ep = dp: the experts' whole on their rank).
// Tolerances as layout_parity_test.cc's without tp.
struct MoeLayoutCase {
  int pp, dp, zero, ep = 1;
  double capacity_factor = 0.0;
};

class MoeLayoutParityTest : public kernels::testing::GpuTestWithParam<MoeLayoutCase> {};

TEST_P(MoeLayoutParityTest, TrainsAsOneGpuDoes) {
  const MoeLayoutCase c = GetParam();
  const sim::ModelConfig model = small_moe(8, 2, 64);
  TrainerOptions options = testing::three_step_options();
  options.lr.decay_steps = 5;
  options.moe.capacity_factor = c.capacity_factor;
  std::vector<testing::Batch> batches;
  for (int i = 0; i < 5; ++i) batches.push_back(testing::random_batch(rng(), 4, 48, 160));
  std::vector<double> want, want_norm;
  {
    Trainer one(model, testing::one_gpu_layout(1, 4), options);
    for (const testing::Batch& b : batches) {
      const StepResult r = one.step(b.inputs, b.targets);
      want.push_back(r.loss);
      want_norm.push_back(r.grad_norm);
    }
  }
  sim::ParallelLayout layout = testing::one_gpu_layout(1, 4);
  layout.pp = c.pp;
  layout.dp = c.dp;
  layout.zero = c.zero;
  layout.ep = c.ep;
  const int world = c.pp * c.dp;
  std::vector<std::vector<double>> got(static_cast<std::size_t>(world)), got_norm(got.size());
  comm::testing::run_in_process(
      world,
      [&](int r, comm::Communicator& w) {
        const comm::ParallelGroups groups = comm::make_parallel_groups(w, layout, w.stream());
        Trainer trainer(model, layout, options, groups);
        for (const testing::Batch& b : batches) {
          const StepResult step = trainer.step(b.inputs, b.targets);
          got[static_cast<std::size_t>(r)].push_back(step.loss);
          got_norm[static_cast<std::size_t>(r)].push_back(step.grad_norm);
        }
      },
      std::chrono::minutes(2));
  for (const std::vector<double>& losses : got)
    for (std::size_t s = 0; s < want.size(); ++s)
      EXPECT_NEAR(losses[s], want[s], (s == 0 ? 1e-5 : 2e-3) * want[s]) << "step " << s + 1;
  // The whole model's gradient norm on every rank (ep: the experts' squares summed over the ep group).
  for (const std::vector<double>& norms : got_norm)
    for (std::size_t s = 0; s < want_norm.size(); ++s)
      EXPECT_NEAR(norms[s], want_norm[s], (s == 0 ? 1e-3 : 1e-2) * want_norm[s]) << "step " << s + 1;
}

INSTANTIATE_TEST_SUITE_P(Layouts, MoeLayoutParityTest,
                         ::testing::Values(MoeLayoutCase{1, 2, 0}, MoeLayoutCase{1, 2, 1}, MoeLayoutCase{2, 1, 0},
                                           MoeLayoutCase{2, 2, 1}, MoeLayoutCase{1, 2, 0, 2},
                                           MoeLayoutCase{1, 4, 0, 4}, MoeLayoutCase{1, 4, 0, 2},
                                           MoeLayoutCase{2, 2, 0, 2}, MoeLayoutCase{1, 4, 0, 4, 1.0},
                                           MoeLayoutCase{1, 2, 1, 2}, MoeLayoutCase{1, 4, 1, 2},
                                           MoeLayoutCase{1, 4, 1, 4}, MoeLayoutCase{2, 2, 1, 2}),
                         [](const auto& info) {
                           const MoeLayoutCase& c = info.param;
                           return "pp" + std::to_string(c.pp) + "_dp" + std::to_string(c.dp) +
                                  (c.zero ? "_zero1" : "") + (c.ep > 1 ? "_ep" + std::to_string(c.ep) : "") +
                                  (c.capacity_factor > 0 ? "_capacity1" : "");
                         });

}  // namespace
}  // namespace sextant::engine
