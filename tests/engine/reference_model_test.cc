// The CPU reference model checked against itself and against arithmetic done
// by hand: hand-written gradients against central finite differences of the
// forward pass, the loss of an untrained model, causality, grouped-query
// attention against duplicated key/value heads, and the rotary embedding.
#include "tests/engine/reference_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace sextant::engine::testing {
namespace {

using Family = ReferenceConfig::Family;

// The brief's tiny model: 2 layers, hidden 16, 4 heads of 4, ffn 32, vocab
// 11, 5 tokens per sequence; Llama shares each key/value head between two
// query heads.
ReferenceConfig tiny_config(Family family, bool tie) {
  ReferenceConfig c;
  c.num_layers = 2;
  c.hidden = 16;
  c.ffn_hidden = 32;
  c.heads = 4;
  c.kv_heads = family == Family::kLlama ? 2 : 4;
  c.head_dim = 4;
  c.vocab = 11;
  c.seq = 5;
  c.family = family;
  c.tie_embeddings = tie;
  return c;
}

constexpr int kBatch = 2;

struct Batch {
  std::vector<int> tokens, targets;
};

Batch random_batch(const ReferenceConfig& c, int batch, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> token(0, c.vocab - 1);
  Batch b;
  for (int i = 0; i < batch * c.seq; ++i) {
    b.tokens.push_back(token(rng));
    b.targets.push_back(token(rng));
  }
  return b;
}

std::vector<std::string> tensor_names(ReferenceWeights& w, const ReferenceConfig& c) {
  std::vector<std::string> names;
  for_each_tensor(w, c, [&](const std::string& name, std::vector<double>&) { names.push_back(name); });
  return names;
}

// Finds `name`'s tensor in `w`.
std::vector<double>& tensor(ReferenceWeights& w, const ReferenceConfig& c, const std::string& name) {
  std::vector<double>* found = nullptr;
  for_each_tensor(w, c, [&](const std::string& n, std::vector<double>& t) {
    if (n == name) found = &t;
  });
  if (found == nullptr) throw std::out_of_range("no tensor " + name);
  return *found;
}

// --- Gradients against finite differences -------------------------------------

struct GradientCase {
  const char* name;
  Family family;
  bool tie;
};

void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.name; }

class ReferenceGradientTest : public ::testing::TestWithParam<GradientCase> {};

// Every tensor's analytic gradient against the central difference
// (L(w + h) - L(w - h)) / 2h at h = 1e-5, on every entry of tensors of at
// most 256 values (all gammas, betas, biases, wte, wpe and proj_weight) and 32
// random entries of each larger one.
//
// Tolerance: |analytic - numeric| <= 1e-6 |analytic| + 1e-9. The central
// difference errs by h^2/6 |L'''| (truncation, ~2e-11 for third derivatives of
// order 1) plus about eps |L| / h = 2.2e-16 * 2.4 / 1e-5 = 5e-11 (rounding of
// the two losses, L ~ ln 11 = 2.4): ~1e-10 absolute in all. Against gradients
// of 1e-4 and more that is < 1e-6 relative; the 1e-9 absolute floor covers the
// few entries near zero, where a relative error means nothing. A wrong index,
// a missing term or a wrong constant errs by order 1 relative.
TEST_P(ReferenceGradientTest, EveryTensorMatchesCentralDifferences) {
  const ReferenceConfig c = tiny_config(GetParam().family, GetParam().tie);
  ReferenceWeights w = reference_random_weights(c, 2024, 0.3);
  const Batch b = random_batch(c, kBatch, 7);

  ReferenceWeights grad;
  const double loss = reference_loss_and_gradients(c, w, b.tokens, b.targets, kBatch, &grad);
  EXPECT_DOUBLE_EQ(loss, reference_loss(c, w, b.tokens, b.targets, kBatch));

  constexpr double kStep = 1e-5;
  std::mt19937_64 rng(99);
  int tensors = 0, entries = 0;
  double worst_relative = 0;
  for (const std::string& name : tensor_names(w, c)) {
    std::vector<double>& values = tensor(w, c, name);
    const std::vector<double>& analytic = tensor(grad, c, name);
    ASSERT_EQ(analytic.size(), values.size()) << name;
    std::vector<std::size_t> picks(values.size());
    for (std::size_t i = 0; i < picks.size(); ++i) picks[i] = i;
    if (picks.size() > 256) {
      std::shuffle(picks.begin(), picks.end(), rng);
      picks.resize(32);
    }
    double norm = 0;
    for (std::size_t i : picks) {
      const double saved = values[i];
      values[i] = saved + kStep;
      const double up = reference_loss(c, w, b.tokens, b.targets, kBatch);
      values[i] = saved - kStep;
      const double down = reference_loss(c, w, b.tokens, b.targets, kBatch);
      values[i] = saved;
      const double numeric = (up - down) / (2 * kStep);
      EXPECT_NEAR(analytic[i], numeric, 1e-6 * std::abs(analytic[i]) + 1e-9) << name << "[" << i << "]";
      if (std::abs(analytic[i]) > 1e-4)
        worst_relative = std::max(worst_relative, std::abs(analytic[i] - numeric) / std::abs(analytic[i]));
      norm += analytic[i] * analytic[i];
      ++entries;
    }
    // Every parameter influences the loss here (no weight is zero), so a
    // tensor whose checked gradient vanishes would make the check vacuous.
    EXPECT_GT(norm, 1e-12) << name;
    ++tensors;
  }
  // GPT: wte, wpe, 12 per layer, 2 final-norm tensors (+ lm_head untied);
  // Llama: wte, 6 per layer, final_norm_gamma (+ lm_head untied).
  const int per_model = c.family == Family::kGpt ? 2 + 12 * 2 + 2 : 1 + 6 * 2 + 1;
  EXPECT_EQ(tensors, per_model + (c.tie_embeddings ? 0 : 1));
  std::cout << "  " << GetParam().name << ": loss " << loss << ", " << entries << " entries of "
            << tensors << " tensors, worst relative error " << worst_relative
            << " (gradients above 1e-4)\n";
}

INSTANTIATE_TEST_SUITE_P(TinyModels, ReferenceGradientTest,
                         ::testing::Values(GradientCase{"gpt_tied", Family::kGpt, true},
                                           GradientCase{"gpt_untied", Family::kGpt, false},
                                           GradientCase{"llama_gqa_untied", Family::kLlama, false},
                                           GradientCase{"llama_gqa_tied", Family::kLlama, true}),
                         [](const ::testing::TestParamInfo<GradientCase>& info) {
                           return std::string(info.param.name);
                         });

// --- Forward-pass properties ----------------------------------------------------

// All-zero weights make the final norm's output zero and so every logit zero:
// the softmax is uniform and each token's loss is ln(vocab) = ln 11 = 2.3979.
TEST(ReferenceModelTest, ZeroWeightsGiveTheUniformLoss) {
  for (Family family : {Family::kGpt, Family::kLlama}) {
    const ReferenceConfig c = tiny_config(family, false);
    ReferenceWeights w = reference_random_weights(c, 1, 0.3);
    for_each_tensor(w, c, [](const std::string&, std::vector<double>& t) { t.assign(t.size(), 0.0); });
    const Batch b = random_batch(c, kBatch, 3);
    for (double token_loss : reference_token_losses(c, w, b.tokens, b.targets, kBatch))
      EXPECT_DOUBLE_EQ(token_loss, std::log(11.0));
    EXPECT_DOUBLE_EQ(reference_loss(c, w, b.tokens, b.targets, kBatch), std::log(11.0));
  }
}

// Changing the token at position 3 of the first sequence leaves the losses at
// positions 0-2 of that sequence, and the whole second sequence, bit for bit
// unchanged (causal mask; sequences independent), and changes positions 3-4.
TEST(ReferenceModelTest, ALaterTokenDoesNotChangeEarlierLosses) {
  for (Family family : {Family::kGpt, Family::kLlama}) {
    const ReferenceConfig c = tiny_config(family, true);
    const ReferenceWeights w = reference_random_weights(c, 5, 0.3);
    Batch b = random_batch(c, kBatch, 11);
    const std::vector<double> before = reference_token_losses(c, w, b.tokens, b.targets, kBatch);
    b.tokens[3] = (b.tokens[3] + 1) % c.vocab;
    const std::vector<double> after = reference_token_losses(c, w, b.tokens, b.targets, kBatch);
    ASSERT_EQ(after.size(), static_cast<std::size_t>(kBatch * c.seq));
    for (int t = 0; t < 3; ++t) EXPECT_EQ(after[t], before[t]) << "position " << t;
    for (int t = 3; t < 5; ++t) EXPECT_NE(after[t], before[t]) << "position " << t;
    for (int t = 5; t < 10; ++t) EXPECT_EQ(after[t], before[t]) << "second sequence, position " << t - 5;
  }
}

// Grouped-query attention (Ainslie et al. 2023): query heads 0-1 share
// key/value head 0 and heads 2-3 head 1. The same model with four key/value
// heads holding copies [0, 0, 1, 1] of them gives the same loss.
TEST(ReferenceModelTest, GroupedQueryAttentionEqualsDuplicatedKeyValueHeads) {
  const ReferenceConfig gqa = tiny_config(Family::kLlama, false);
  ReferenceConfig mha = gqa;
  mha.kv_heads = 4;
  const ReferenceWeights w = reference_random_weights(gqa, 8, 0.3);
  ReferenceWeights copied = w;
  const int h = gqa.hidden, d = gqa.head_dim;
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const std::vector<double>& from = w.layers[l].qkv_weight;  // rows [Q 16 | K 8 | V 8]
    std::vector<double> to(from.begin(), from.begin() + gqa.q_dim() * h);  // rows [Q 16 | K 16 | V 16]
    for (int part = 0; part < 2; ++part) {                                 // K, then V
      for (int head = 0; head < mha.kv_heads; ++head) {
        const int source_row = gqa.q_dim() + part * gqa.kv_dim() + (head / 2) * d;
        to.insert(to.end(), from.begin() + source_row * h, from.begin() + (source_row + d) * h);
      }
    }
    copied.layers[l].qkv_weight = to;
  }
  const Batch b = random_batch(gqa, kBatch, 13);
  const double want = reference_loss(mha, copied, b.tokens, b.targets, kBatch);
  EXPECT_NEAR(reference_loss(gqa, w, b.tokens, b.targets, kBatch), want, 1e-13 * want);
}

// Tying uses wte as the output projection: an untied model whose lm_head is a
// copy of wte gives the tied model's loss exactly (the same arithmetic).
TEST(ReferenceModelTest, TiedEmbeddingsEqualACopiedOutputProjection) {
  const ReferenceConfig tied = tiny_config(Family::kGpt, true);
  const ReferenceConfig untied = tiny_config(Family::kGpt, false);
  const ReferenceWeights w = reference_random_weights(tied, 17, 0.3);
  ReferenceWeights copied = w;
  copied.lm_head = w.wte;
  const Batch b = random_batch(tied, kBatch, 19);
  EXPECT_EQ(reference_loss(tied, w, b.tokens, b.targets, kBatch),
            reference_loss(untied, copied, b.tokens, b.targets, kBatch));
}

// --- Rotary position embedding ---------------------------------------------------

// At position 0 every angle is 0: cos = 1 and sin = 0 exactly, so the rotation
// returns its input bit for bit.
TEST(ReferenceRopeTest, PositionZeroIsTheIdentity) {
  const std::vector<double> v = {0.3, -1.25, 2.0, 0.7, -0.1, 5.5, 1e-3, -4.0};
  std::vector<double> rotated = v;
  reference_rope(rotated, 0, 10000);
  EXPECT_EQ(rotated, v);
}

// head_dim 4 at position 1: pair (0, 2) turns by 10000^(-0/4) = 1 rad and pair
// (1, 3) by 10000^(-2/4) = 0.01 rad; out[i] = x[i] cos - x[i + 2] sin,
// out[i + 2] = x[i + 2] cos + x[i] sin (rotate-half, not adjacent pairs).
TEST(ReferenceRopeTest, RotatesHalvesByTheirFrequencies) {
  std::vector<double> v = {1, 2, 3, 4};
  reference_rope(v, 1, 10000);
  EXPECT_NEAR(v[0], 1 * std::cos(1.0) - 3 * std::sin(1.0), 1e-15);  // -1.98411
  EXPECT_NEAR(v[2], 3 * std::cos(1.0) + 1 * std::sin(1.0), 1e-15);  //  2.46238
  EXPECT_NEAR(v[1], 2 * std::cos(0.01) - 4 * std::sin(0.01), 1e-15);  // 1.95990
  EXPECT_NEAR(v[3], 4 * std::cos(0.01) + 2 * std::sin(0.01), 1e-15);  // 4.01980
}

// Su et al. 2021, eq. 11's goal: the rotated query-key product depends only on
// the positions' difference, <R_m q, R_n k> = <R_(m+s) q, R_(n+s) k>; and the
// rotation keeps lengths.
TEST(ReferenceRopeTest, ProductDependsOnlyOnRelativePosition) {
  const std::vector<double> q = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1};
  const std::vector<double> k = {1.5, 0.4, -0.9, 0.2, 0.7, -1.3};
  auto rotated_dot = [&](int m, int n) {
    std::vector<double> a = q, b = k;
    reference_rope(a, m, 10000);
    reference_rope(b, n, 10000);
    double dot = 0;
    for (std::size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i];
    return dot;
  };
  const double base = rotated_dot(3, 1);
  EXPECT_NEAR(rotated_dot(7, 5), base, 1e-12);
  EXPECT_NEAR(rotated_dot(1002, 1000), base, 1e-12);
  EXPECT_GT(std::abs(rotated_dot(4, 1) - base), 1e-3);  // another distance, another product

  std::vector<double> r = q;
  reference_rope(r, 37, 10000);
  double before = 0, after = 0;
  for (std::size_t i = 0; i < q.size(); ++i) before += q[i] * q[i], after += r[i] * r[i];
  EXPECT_NEAR(after, before, 1e-12);
}

// --- Names and errors ---------------------------------------------------------

TEST(ReferenceModelTest, NamesTensorsAsTheEngine) {
  ReferenceConfig c = tiny_config(Family::kLlama, false);
  c.num_layers = 1;
  ReferenceWeights w = reference_random_weights(c, 1, 0.1);
  EXPECT_EQ(tensor_names(w, c),
            (std::vector<std::string>{"wte", "layers.0.norm1_gamma", "layers.0.qkv_weight",
                                      "layers.0.proj_weight", "layers.0.norm2_gamma", "layers.0.fc1_weight",
                                      "layers.0.fc2_weight", "final_norm_gamma", "lm_head"}));
  EXPECT_EQ(tensor(w, c, "layers.0.qkv_weight").size(), 32u * 16);  // (4 + 2 x 2 heads) x 4, 16
  EXPECT_EQ(tensor(w, c, "layers.0.fc1_weight").size(), 64u * 16);  // [gate | up] 2 x 32, 16

  ReferenceConfig g = tiny_config(Family::kGpt, true);
  g.num_layers = 1;
  ReferenceWeights gw = reference_random_weights(g, 1, 0.1);
  EXPECT_EQ(tensor_names(gw, g),
            (std::vector<std::string>{"wte", "wpe", "layers.0.norm1_gamma", "layers.0.norm1_beta",
                                      "layers.0.qkv_weight", "layers.0.qkv_bias", "layers.0.proj_weight",
                                      "layers.0.proj_bias", "layers.0.norm2_gamma", "layers.0.norm2_beta",
                                      "layers.0.fc1_weight", "layers.0.fc1_bias", "layers.0.fc2_weight",
                                      "layers.0.fc2_bias", "final_norm_gamma", "final_norm_beta"}));
  for (double gamma : tensor(gw, g, "final_norm_gamma")) EXPECT_NEAR(gamma, 1.0, 0.1);
}

TEST(ReferenceModelTest, ReportsEveryProblemWithTheValues) {
  ReferenceConfig c = tiny_config(Family::kLlama, false);
  c.kv_heads = 3;
  c.head_dim = 5;
  try {
    reference_random_weights(c, 1, 0.1);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "reference model: heads (4) must be a multiple of kv_heads (3); "
                 "head_dim (5) must be even for rotary embeddings");
  }

  const ReferenceConfig good = tiny_config(Family::kGpt, true);
  ReferenceWeights w = reference_random_weights(good, 1, 0.1);
  w.layers[1].fc1_bias.pop_back();
  Batch b = random_batch(good, kBatch, 1);
  b.targets[4] = 11;
  try {
    reference_loss(good, w, b.tokens, b.targets, kBatch);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "reference model: layers.1.fc1_bias has 31 values, expected 32; "
                 "targets[4] (11) is outside [0, vocab 11)");
  }
  EXPECT_THROW(reference_loss(good, reference_random_weights(good, 1, 0.1), b.tokens, b.targets, 3),
               std::invalid_argument);  // 10 tokens for a batch of 3 x 5
}

}  // namespace
}  // namespace sextant::engine::testing
