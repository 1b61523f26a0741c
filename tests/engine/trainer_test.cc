// The engine's training step on the GPU against a double-precision CPU model
// of the same network (tests/engine/reference_model.h): every gradient of a
// tiny GPT and a tiny Llama, gradient accumulation, recomputation, the
// initialisation and a short training run. Skips without a GPU (fails
// instead under SEXTANT_REQUIRE_GPU=1).
#include "engine/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/bf16.h"
#include "tests/engine/reference_model.h"
#include "tests/engine/random_batch.h"
#include "tests/engine/small_models.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine {
namespace {

using kernels::testing::GpuTest;
using testing::ReferenceConfig;
using testing::ReferenceWeights;

struct TinyModel {
  bool llama = false;
  bool tie = true;
  int padded_heads = 0;  // > 0: this many heads of 40, run zero-padded to 128 (kernels/head_copy.h)
};

// Two layers of hidden 64 (the tiny model). GPT: one head of 64;
// Llama: two query heads sharing one key/value head (GQA) of 64, so the
// attention output (128) is wider than the residual stream.
sim::ModelConfig tiny_model(const TinyModel& t) {
  sim::ModelConfig m;
  m.name = t.llama ? "tiny-llama" : "tiny-gpt";
  m.num_layers = 2;
  m.hidden_size = 64;
  m.ffn_hidden_size = t.llama ? 128 : 256;
  m.num_attention_heads = t.llama ? 2 : 1;
  m.num_query_groups = 1;
  m.kv_channels = 64;
  if (t.padded_heads > 0) {
    m.num_attention_heads = t.padded_heads;
    m.num_query_groups = t.padded_heads;
    m.kv_channels = 40;
  }
  m.vocab_size = 96;
  m.seq_length = 40;  // not a multiple of the attention kernels' tiles
  m.activation = t.llama ? sim::Activation::kSwiglu : sim::Activation::kGelu;
  m.normalization = t.llama ? sim::Normalization::kRmsNorm : sim::Normalization::kLayerNorm;
  m.position_embedding = t.llama ? sim::PositionEmbedding::kRope : sim::PositionEmbedding::kLearnedAbsolute;
  m.add_bias_linear = !t.llama;
  m.tie_embeddings = t.tie;
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  return m;
}

ReferenceConfig reference_config(const sim::ModelConfig& m, const TransformerShape& s) {
  ReferenceConfig c;
  c.num_layers = s.num_layers;
  c.hidden = s.hidden;
  c.ffn_hidden = s.ffn_hidden;
  c.heads = s.heads;
  c.kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.vocab = s.vocab;
  c.seq = s.seq;
  c.family = m.activation == sim::Activation::kSwiglu ? ReferenceConfig::Family::kLlama
                                                       : ReferenceConfig::Family::kGpt;
  c.tie_embeddings = s.tie_embeddings;
  c.norm_eps = s.norm_eps;
  c.rope_theta = s.rope_theta;
  return c;
}

double rounded_to_bf16(double v) {
  return kernels::to_float(kernels::from_float(static_cast<float>(v)));
}

// Random weights, rounded to bf16 so the engine's bf16 copy and the reference
// hold exactly the same numbers; loaded into the trainer.
ReferenceWeights load_random_weights(Trainer& trainer, const ReferenceConfig& config,
                                     std::uint64_t seed) {
  ReferenceWeights w = testing::reference_random_weights(config, seed, 0.15);
  testing::for_each_tensor(w, config, [&](const std::string& name, std::vector<double>& values) {
    std::vector<float> as_float(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = rounded_to_bf16(values[i]);
      as_float[i] = static_cast<float>(values[i]);
    }
    trainer.set_parameter(name, as_float);
  });
  return w;
}

double relative_l2_error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

using testing::Batch;
using testing::random_batch;

struct GradientCase {
  const char* name;
  TinyModel model;
  int micro_batch;
  int global_batch;
  sim::Recompute recompute;
};

class TrainerGradientTest : public kernels::testing::GpuTestWithParam<GradientCase> {};

// Every parameter's gradient of the mean loss over the global batch equals the
// CPU model's. Tolerance: relative L2 error 3e-2 per tensor. The engine rounds
// every activation and activation gradient to bf16 (relative error 2^-9 each);
// through two layers, attention and the vocabulary softmax the measured error
// is about 0.3-1 % (the worst tensor's is printed); a wrong index, a missed
// term or a dropped accumulation gives errors of order 1.
TEST_P(TrainerGradientTest, EveryGradientMatchesTheCpuReference) {
  const GradientCase& c = GetParam();
  const sim::ModelConfig model = tiny_model(c.model);
  const TransformerShape shape = transformer_shape_of(model, c.micro_batch, static_cast<int>(model.seq_length));
  ASSERT_TRUE(transformer_shape_problems(shape, model).empty());
  Trainer trainer(model, testing::one_gpu_layout(c.micro_batch, c.global_batch, c.recompute), TrainerOptions{});
  const ReferenceConfig config = reference_config(model, shape);
  ReferenceWeights weights = load_random_weights(trainer, config, rng()());
  const Batch batch = random_batch(rng(), c.global_batch, shape.seq, shape.vocab);

  const double loss = trainer.forward_backward(batch.inputs, batch.targets);
  ReferenceWeights reference_gradients;
  const std::vector<int> tokens(batch.inputs.begin(), batch.inputs.end());
  const std::vector<int> targets(batch.targets.begin(), batch.targets.end());
  const double reference_loss = testing::reference_loss_and_gradients(
      config, weights, tokens, targets, c.global_batch, &reference_gradients);
  EXPECT_NEAR(loss, reference_loss, 1e-2 * reference_loss);

  int tensors = 0;
  double worst = 0;
  std::string worst_name;
  testing::for_each_tensor(reference_gradients, config,
                           [&](const std::string& name, std::vector<double>& want) {
                             const std::vector<float> got = trainer.gradient(name);
                             ASSERT_EQ(got.size(), want.size()) << name;
                             const double error = relative_l2_error(got, want);
                             EXPECT_LT(error, 3e-2) << name;
                             if (error > worst) {
                               worst = error;
                               worst_name = name;
                             }
                             ++tensors;
                           });
  EXPECT_EQ(static_cast<std::size_t>(tensors), trainer.chunk_layout(0).tensors().size());
  std::cout << "  " << c.name << ": " << tensors << " tensors, loss " << loss << " (reference "
            << reference_loss << "), worst relative L2 error " << worst << " (" << worst_name << ")\n";
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, TrainerGradientTest,
    ::testing::Values(
        GradientCase{"gpt_untied_two_microbatches", {false, false}, 2, 4, sim::Recompute::kNone},
        GradientCase{"gpt_tied_full_recompute", {false, true}, 3, 3, sim::Recompute::kFull},
        GradientCase{"llama_gqa_selective", {true, false}, 1, 2, sim::Recompute::kSelective},
        GradientCase{"llama_gqa_full_recompute", {true, false}, 2, 2, sim::Recompute::kFull},
        GradientCase{"gpt_head_dim_40_padded", {false, true, 2}, 2, 2, sim::Recompute::kNone}),
    [](const ::testing::TestParamInfo<GradientCase>& info) { return std::string(info.param.name); });

// An MoE model (tiny_model's Llama with every MLP 4 SwiGLU experts of 64,
// top-2, the Switch loss at 1e-2) against the CPU model: every gradient, the
// router's and the experts' included, and the routing the engine counted.
// One micro-batch (the reference takes the Switch loss over the whole batch).
// The weights are drawn until every token's k-th choice leads its (k+1)-th by
// 0.02 in the CPU model's logits (std about 0.7), so that the engine's bf16
// activations (a few 1e-3 off in the logits: 2^-9 per element over 64 terms,
// and the first layer's error in the second's input) route every token as the
// CPU model does.
class MoeGradientTest : public kernels::testing::GpuTestWithParam<sim::Recompute> {};

TEST_P(MoeGradientTest, EveryGradientMatchesTheCpuReference) {
  sim::ModelConfig model = tiny_model({true, false});
  model.moe = sim::MoeConfig{};
  model.moe->num_experts = 4;
  model.moe->router_topk = 2;
  model.moe->ffn_hidden_size = 64;
  constexpr int kSequences = 2;
  const TransformerShape shape = transformer_shape_of(model, kSequences, static_cast<int>(model.seq_length));
  ASSERT_TRUE(transformer_shape_problems(shape, model).empty());
  TrainerOptions options;
  options.moe.aux_loss_coeff = 1e-2f;
  Trainer trainer(model, testing::one_gpu_layout(kSequences, kSequences, GetParam()), options);
  ReferenceConfig config = reference_config(model, shape);
  config.experts = 4;
  config.topk = 2;
  config.expert_ffn = 64;
  config.aux_loss_coeff = options.moe.aux_loss_coeff;

  const Batch batch = random_batch(rng(), kSequences, shape.seq, shape.vocab);
  const std::vector<int> tokens(batch.inputs.begin(), batch.inputs.end());
  const std::vector<int> targets(batch.targets.begin(), batch.targets.end());
  ReferenceWeights weights;
  std::vector<testing::ReferenceMoeRouting> routing;
  bool robust = false;
  for (int attempt = 0; attempt < 2000 && !robust; ++attempt) {
    weights = testing::reference_random_weights(config, rng()(), 0.15);
    testing::for_each_tensor(weights, config, [](const std::string&, std::vector<double>& values) {
      for (double& v : values) v = rounded_to_bf16(v);
    });
    routing = testing::reference_moe_routing(config, weights, tokens, kSequences);
    robust = std::all_of(routing.begin(), routing.end(),
                         [](const testing::ReferenceMoeRouting& r) { return r.min_selection_margin > 0.02; });
  }
  ASSERT_TRUE(robust) << "no draw of 2000 routes every token by a margin of 0.02";
  testing::for_each_tensor(weights, config, [&](const std::string& name, std::vector<double>& values) {
    trainer.set_parameter(name, std::vector<float>(values.begin(), values.end()));
  });

  const double loss = trainer.forward_backward(batch.inputs, batch.targets);
  ReferenceWeights reference_gradients;
  const double reference_loss =
      testing::reference_loss_and_gradients(config, weights, tokens, targets, kSequences, &reference_gradients);
  // The engine reports the language-model loss; the reference adds the Switch
  // losses (alpha x the value per layer, which the engine counts on its own).
  const transformer::MoeStatistics statistics = trainer.take_moe_statistics();
  const double with_router_losses = loss + config.aux_loss_coeff * statistics.aux_loss_sum;
  EXPECT_NEAR(with_router_losses, reference_loss, 2e-3 * reference_loss);
  double reference_aux = 0;
  for (const testing::ReferenceMoeRouting& r : routing) reference_aux += r.aux_loss;
  EXPECT_NEAR(statistics.aux_loss_sum, reference_aux, 1e-2 * reference_aux);
  ASSERT_EQ(statistics.expert_tokens.size(), routing.size());
  for (std::size_t l = 0; l < routing.size(); ++l)
    for (std::size_t e = 0; e < 4; ++e)
      EXPECT_EQ(statistics.expert_tokens[l][e], routing[l].expert_tokens[e]) << "layer " << l << " expert " << e;

  double worst = 0;
  std::string worst_name;
  testing::for_each_tensor(reference_gradients, config, [&](const std::string& name, std::vector<double>& want) {
    const std::vector<float> got = trainer.gradient(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    const double error = relative_l2_error(got, want);
    EXPECT_LT(error, 3e-2) << name;
    if (error > worst) {
      worst = error;
      worst_name = name;
    }
  });
  std::cout << "  moe " << sim::to_string(GetParam()) << ": loss with the Switch losses " << with_router_losses
            << " (reference " << reference_loss
            << "), worst relative L2 error " << worst << " (" << worst_name << ")\n";
}

INSTANTIATE_TEST_SUITE_P(Recompute, MoeGradientTest,
                         ::testing::Values(sim::Recompute::kNone, sim::Recompute::kFull),
                         [](const auto& info) { return std::string(sim::to_string(info.param)); });

class TrainerTest : public GpuTest {};

TEST_F(TrainerTest, FullRecomputationGivesTheSameLossAndGradients) {
  const sim::ModelConfig model = tiny_model({true, false});
  const TransformerShape shape = transformer_shape_of(model, 2, 40);
  const Batch batch = random_batch(rng(), 2, shape.seq, shape.vocab);
  const std::uint64_t seed = rng()();
  std::vector<std::vector<float>> gradients[2];
  double losses[2];
  for (int i = 0; i < 2; ++i) {
    TrainerOptions options;
    options.seed = seed;
    Trainer trainer(model, testing::one_gpu_layout(2, 2, i == 0 ? sim::Recompute::kNone : sim::Recompute::kFull),
                    options);
    losses[i] = trainer.forward_backward(batch.inputs, batch.targets);
    for (const std::string& name : trainer.tensor_names()) gradients[i].push_back(trainer.gradient(name));
  }
  // The recomputed forward runs the same kernels on the same inputs: the loss is
  // bit-identical. Gradients differ only through flash attention's dQ, which is
  // summed with fp32 atomics in any order (kernels/flash_attention.h).
  EXPECT_EQ(losses[0], losses[1]);
  for (std::size_t t = 0; t < gradients[0].size(); ++t) {
    const std::vector<double> want(gradients[0][t].begin(), gradients[0][t].end());
    EXPECT_LT(relative_l2_error(gradients[1][t], want), 1e-3) << "tensor " << t;
  }
}

TEST_F(TrainerTest, InitialisesFromTheSeedAsMegatronDoes) {
  const sim::ModelConfig model = tiny_model({false, true});
  TrainerOptions options;
  options.seed = 42;
  options.init_std = 0.02;
  const sim::ParallelLayout one = testing::one_gpu_layout(1, 1);
  Trainer a(model, one, options);
  Trainer b(model, one, options);
  options.seed = 43;
  Trainer c(model, one, options);
  auto stddev = [](const std::vector<float>& v) {
    double sum = 0, squares = 0;
    for (float x : v) {
      sum += x;
      squares += static_cast<double>(x) * x;
    }
    const double mean = sum / v.size();
    return std::sqrt(squares / v.size() - mean * mean);
  };
  const std::vector<float> wte = a.master_parameter("wte");  // 96 x 64 = 6144 draws
  EXPECT_NEAR(stddev(wte), 0.02, 0.02 * 0.05);
  // Output projections: 0.02 / sqrt(2 layers x 2) = 0.01 (scaled_init_method_normal).
  EXPECT_NEAR(stddev(a.master_parameter("layers.1.fc2_weight")), 0.01, 0.01 * 0.05);
  for (float g : a.master_parameter("layers.0.norm1_gamma")) ASSERT_EQ(g, 1.0f);
  for (float v : a.master_parameter("layers.0.qkv_bias")) ASSERT_EQ(v, 0.0f);
  EXPECT_EQ(wte, b.master_parameter("wte"));
  EXPECT_NE(wte, c.master_parameter("wte"));
}

TEST_F(TrainerTest, LearnsARepeatedBatchAndFollowsTheSchedule) {
  const sim::ModelConfig model = tiny_model({false, true});
  const TransformerShape shape = transformer_shape_of(model, 2, 40);
  TrainerOptions options;
  options.lr.max_lr = 3e-3;
  options.lr.min_lr = 3e-4;
  options.lr.warmup_steps = 5;
  options.lr.decay_steps = 60;
  Trainer trainer(model, testing::one_gpu_layout(2, 4), options);
  const Batch batch = random_batch(rng(), 4, shape.seq, shape.vocab);
  std::vector<double> losses;
  for (int step = 1; step <= 60; ++step) {
    const StepResult r = trainer.step(batch.inputs, batch.targets);
    ASSERT_FALSE(r.skipped);
    EXPECT_EQ(r.step, step);
    EXPECT_DOUBLE_EQ(r.lr, options.lr.at(step));
    EXPECT_GT(r.grad_norm, 0);
    losses.push_back(r.loss);
  }
  // Random targets over 96 tokens: the first loss is about ln 96 = 4.56 (small
  // weights give near-uniform predictions); 160 (input, target) pairs can be
  // memorised, so the loss must fall far below it.
  EXPECT_NEAR(losses.front(), std::log(96.0), 0.3);
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "loss went " << losses.front() << " -> " << losses.back();
  EXPECT_EQ(trainer.steps_done(), 60);
}

TEST_F(TrainerTest, TimesEveryTaskUnderThePlansName) {
  const sim::ModelConfig model = tiny_model({false, true});
  const TransformerShape shape = transformer_shape_of(model, 1, 40);
  TrainerOptions options;
  options.time_tasks = true;
  const sim::ParallelLayout layout = testing::one_gpu_layout(1, 2, sim::Recompute::kFull);
  Trainer trainer(model, layout, options);
  const Batch batch = random_batch(rng(), 2, shape.seq, shape.vocab);
  const StepResult r = trainer.step(batch.inputs, batch.targets);
  // Per micro-batch: embedding fwd/bwd, 2 layers x (attn, mlp) x (fwd, recompute,
  // bwd), output fwd/bwd = 16; two micro-batches and the optimizer: 33.
  ASSERT_EQ(r.tasks.size(), trainer.tasks_per_step());
  EXPECT_EQ(r.tasks.size(), 33u);
  EXPECT_EQ(r.tasks.front().name, "stage0.mb0.embedding.fwd");
  EXPECT_EQ(r.tasks.back().name, "stage0.optimizer.step");
  double total = 0;
  int recomputes = 0;
  for (const TaskTime& t : r.tasks) {
    EXPECT_GT(t.seconds, 0) << t.name;
    total += t.seconds;
    if (t.name.find(".recompute") != std::string::npos) ++recomputes;
  }
  EXPECT_EQ(recomputes, 2 * 2 * 2);
  EXPECT_LT(total, r.seconds);  // the tasks run inside the step
  // Off by default: no times, no events.
  options.time_tasks = false;
  Trainer quiet(model, layout, options);
  EXPECT_TRUE(quiet.step(batch.inputs, batch.targets).tasks.empty());
}

}  // namespace
}  // namespace sextant::engine
