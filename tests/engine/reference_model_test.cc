// The CPU reference model checked against itself and against arithmetic done
// by hand: hand-written gradients against central finite differences of the
// forward pass, the loss of an untrained model, causality, grouped-query
// attention against duplicated key/value heads, the rotary embedding, and the
// Mixture-of-Experts layers (routing, the load-balancing loss, and an MoE of
// identical experts against the dense MLP).
#include "tests/engine/reference_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
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

// tiny_config with every MLP an MoE layer: 4 experts of width 8, top-2.
ReferenceConfig moe_config(Family family, bool tie, double aux_loss_coeff) {
  ReferenceConfig c = tiny_config(family, tie);
  c.experts = 4;
  c.topk = 2;
  c.expert_ffn = 8;
  c.aux_loss_coeff = aux_loss_coeff;
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
  bool moe = false;  // moe_config instead of tiny_config
  double aux_loss_coeff = 0;
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
//
// MoE: the loss is smooth only while no top-k selection changes. A step of
// 1e-5 moves a router logit by about 1e-5 (|m| ~ 4, router weights ~0.3,
// through every layer below), so the test first asserts that every token's
// k-th and (k+1)-th logits are at least 1e-3 apart in every layer: no
// difference quotient here crosses a selection boundary.
TEST_P(ReferenceGradientTest, EveryTensorMatchesCentralDifferences) {
  const GradientCase& param = GetParam();
  const ReferenceConfig c = param.moe ? moe_config(param.family, param.tie, param.aux_loss_coeff)
                                      : tiny_config(param.family, param.tie);
  ReferenceWeights w = reference_random_weights(c, 2024, 0.3);
  const Batch b = random_batch(c, kBatch, 7);
  double margin = std::numeric_limits<double>::infinity();
  for (const ReferenceMoeRouting& layer : reference_moe_routing(c, w, b.tokens, kBatch))
    margin = std::min(margin, layer.min_selection_margin);
  if (c.moe()) {
    ASSERT_GT(margin, 1e-3) << "a top-k selection is too close to a tie for finite differences";
  }

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
  // Llama: wte, 6 per layer, final_norm_gamma (+ lm_head untied). An MoE
  // layer trades fc1/fc2 (and GPT's two biases) for the router and the two
  // expert tensors: GPT 11 per layer, Llama 7.
  const int per_layer = c.family == Family::kGpt ? (c.moe() ? 11 : 12) : (c.moe() ? 7 : 6);
  const int per_model = (c.family == Family::kGpt ? 2 + 2 : 1 + 1) + per_layer * c.num_layers;
  EXPECT_EQ(tensors, per_model + (c.tie_embeddings ? 0 : 1));
  std::cout << "  " << param.name << ": loss " << loss << ", " << entries << " entries of " << tensors
            << " tensors, worst relative error " << worst_relative << " (gradients above 1e-4)";
  if (c.moe()) std::cout << ", smallest top-k logit margin " << margin;
  std::cout << "\n";
}

INSTANTIATE_TEST_SUITE_P(TinyModels, ReferenceGradientTest,
                         ::testing::Values(GradientCase{"gpt_tied", Family::kGpt, true},
                                           GradientCase{"gpt_untied", Family::kGpt, false},
                                           GradientCase{"llama_gqa_untied", Family::kLlama, false},
                                           GradientCase{"llama_gqa_tied", Family::kLlama, true},
                                           GradientCase{"llama_moe_untied", Family::kLlama, false, true, 0},
                                           GradientCase{"llama_moe_aux_tied", Family::kLlama, true, true, 1e-2},
                                           GradientCase{"gpt_moe_aux_untied", Family::kGpt, false, true, 1e-2}),
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

// --- Mixture of experts -----------------------------------------------------------

// An MoE layer whose every expert holds the dense MLP's weights computes
// sum_j w_j MLP(m) = MLP(m), the weights summing to 1: the dense model's loss
// to rounding (the sum of the weights is 1 within an ulp or two). The
// gradients agree too: the experts' summed gradients are the dense fc1/fc2's,
// every other tensor's the same, and the router's vanishes (each dw_j is the
// same, so w_j (dw_j - sum_l w_l dw_l) = 0). GPT's dense MLP has its biases
// zeroed (the experts have none). Aux loss off.
TEST(ReferenceMoeTest, IdenticalExpertsEqualTheDenseMlp) {
  for (Family family : {Family::kLlama, Family::kGpt}) {
    ReferenceConfig dense = tiny_config(family, false);
    dense.ffn_hidden = 8;
    ReferenceConfig moe = moe_config(family, false, 0);
    const ReferenceWeights router = reference_random_weights(moe, 23, 0.3);
    ReferenceWeights w = reference_random_weights(dense, 29, 0.3);
    ReferenceWeights experts = w;
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      if (family == Family::kGpt) {
        w.layers[l].fc1_bias.assign(w.layers[l].fc1_bias.size(), 0.0);
        w.layers[l].fc2_bias.assign(w.layers[l].fc2_bias.size(), 0.0);
      }
      ReferenceLayer& e = experts.layers[l];
      e.router_weight = router.layers[l].router_weight;
      e.expert_fc1_weight.clear();
      e.expert_fc2_weight.clear();
      for (int i = 0; i < moe.experts; ++i) {
        e.expert_fc1_weight.insert(e.expert_fc1_weight.end(), e.fc1_weight.begin(), e.fc1_weight.end());
        e.expert_fc2_weight.insert(e.expert_fc2_weight.end(), e.fc2_weight.begin(), e.fc2_weight.end());
      }
      e.fc1_weight.clear();
      e.fc1_bias.clear();
      e.fc2_weight.clear();
      e.fc2_bias.clear();
    }
    const Batch b = random_batch(dense, kBatch, 31);
    ReferenceWeights dense_grad, moe_grad;
    const double want = reference_loss_and_gradients(dense, w, b.tokens, b.targets, kBatch, &dense_grad);
    const double got = reference_loss_and_gradients(moe, experts, b.tokens, b.targets, kBatch, &moe_grad);
    EXPECT_NEAR(got, want, 1e-12);
    EXPECT_NE(got, std::log(11.0));  // not a vacuous model

    for (const std::string& name : tensor_names(dense_grad, dense)) {
      const std::vector<double>& d = tensor(dense_grad, dense, name);
      std::vector<double> m(d.size(), 0.0);
      const std::string fc1 = ".fc1_weight", fc2 = ".fc2_weight";
      if (name.ends_with("bias") && name.find(".fc") != std::string::npos) continue;  // zeroed, absent
      if (name.ends_with(fc1) || name.ends_with(fc2)) {
        const std::string prefix = name.substr(0, name.size() - fc1.size());
        const std::vector<double>& stacked =
            tensor(moe_grad, moe, prefix + (name.ends_with(fc1) ? ".expert_fc1_weight" : ".expert_fc2_weight"));
        ASSERT_EQ(stacked.size(), d.size() * moe.experts) << name;
        for (std::size_t i = 0; i < stacked.size(); ++i) m[i % d.size()] += stacked[i];
      } else {
        m = tensor(moe_grad, moe, name);
      }
      ASSERT_EQ(m.size(), d.size()) << name;
      for (std::size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(m[i], d[i], 1e-12) << name << "[" << i << "]";
    }
    for (int l = 0; l < moe.num_layers; ++l)
      for (double g : tensor(moe_grad, moe, "layers." + std::to_string(l) + ".router_weight"))
        EXPECT_NEAR(g, 0.0, 1e-14);
  }
}

// The routing's invariants on random weights: k distinct experts per token by
// descending weight, weights summing to 1, counts summing to rows x k, the
// counts agreeing with the ids; and the total loss is the cross-entropy plus
// alpha times the layers' aux_loss.
TEST(ReferenceMoeTest, RoutesEachTokenToItsTopkExperts) {
  const ReferenceConfig c = moe_config(Family::kLlama, true, 1e-2);
  ReferenceConfig no_aux = c;
  no_aux.aux_loss_coeff = 0;
  const ReferenceWeights w = reference_random_weights(c, 37, 0.3);
  const Batch b = random_batch(c, kBatch, 41);
  const int rows = kBatch * c.seq, k = c.topk;
  const std::vector<ReferenceMoeRouting> routing = reference_moe_routing(c, w, b.tokens, kBatch);
  ASSERT_EQ(routing.size(), 2u);
  double aux = 0;
  for (const ReferenceMoeRouting& r : routing) {
    ASSERT_EQ(r.topk_ids.size(), static_cast<std::size_t>(rows * k));
    std::vector<int> counts(c.experts, 0);
    for (int t = 0; t < rows; ++t) {
      EXPECT_NE(r.topk_ids[t * k], r.topk_ids[t * k + 1]);
      EXPECT_GE(r.topk_weights[t * k], r.topk_weights[t * k + 1]);
      EXPECT_NEAR(r.topk_weights[t * k] + r.topk_weights[t * k + 1], 1.0, 1e-15);
      // The selected logits are the largest: each beats every unselected one.
      for (int e = 0; e < c.experts; ++e) {
        if (e != r.topk_ids[t * k] && e != r.topk_ids[t * k + 1]) {
          EXPECT_GT(r.logits[t * c.experts + r.topk_ids[t * k + 1]], r.logits[t * c.experts + e]);
        }
      }
      // w_0 / w_1 = exp(z_0 - z_1): the softmax over the selected logits.
      EXPECT_NEAR(r.topk_weights[t * k] / r.topk_weights[t * k + 1],
                  std::exp(r.logits[t * c.experts + r.topk_ids[t * k]] -
                           r.logits[t * c.experts + r.topk_ids[t * k + 1]]),
                  1e-13);
      for (int j = 0; j < k; ++j) ++counts[r.topk_ids[t * k + j]];
    }
    EXPECT_EQ(r.expert_tokens, counts);
    EXPECT_GT(r.aux_loss, 0.0);
    aux += r.aux_loss;
  }
  EXPECT_NEAR(reference_loss(c, w, b.tokens, b.targets, kBatch),
              reference_loss(no_aux, w, b.tokens, b.targets, kBatch) + 1e-2 * aux, 1e-15);
  const ReferenceConfig dense = tiny_config(Family::kLlama, true);
  EXPECT_TRUE(
      reference_moe_routing(dense, reference_random_weights(dense, 1, 0.3), b.tokens, kBatch).empty());
}

// A zero router gives every expert probability 1/4: the tie goes to the lower
// indices, so every token picks experts 0 and 1 with weight 1/2 each, and the
// Switch loss is N sum_i f_i P_i = 4 (1/2 x 1/4 + 1/2 x 1/4) = 1 (Megatron's
// k-normalised f makes a uniform router's loss alpha x 1 at any k). The load is
// as unbalanced as it can be, yet the loss is 1 because P is uniform: only P
// carries gradient, pushing probability away from the overloaded experts.
TEST(ReferenceMoeTest, AZeroRouterBreaksTiesTowardsLowerExperts) {
  const ReferenceConfig c = moe_config(Family::kLlama, true, 1e-2);
  ReferenceWeights w = reference_random_weights(c, 43, 0.3);
  for (ReferenceLayer& l : w.layers) l.router_weight.assign(l.router_weight.size(), 0.0);
  const Batch b = random_batch(c, kBatch, 47);
  for (const ReferenceMoeRouting& r : reference_moe_routing(c, w, b.tokens, kBatch)) {
    for (int t = 0; t < kBatch * c.seq; ++t) {
      EXPECT_EQ(r.topk_ids[2 * t], 0);
      EXPECT_EQ(r.topk_ids[2 * t + 1], 1);
      EXPECT_EQ(r.topk_weights[2 * t], 0.5);
      EXPECT_EQ(r.topk_weights[2 * t + 1], 0.5);
    }
    EXPECT_EQ(r.expert_tokens, (std::vector<int>{10, 10, 0, 0}));
    EXPECT_DOUBLE_EQ(r.aux_loss, 1.0);
    EXPECT_EQ(r.min_selection_margin, 0.0);
  }
  // The aux loss's share of the router gradient: the gradient with the aux
  // loss minus the gradient without it (the forward pass is the same).
  ReferenceConfig no_aux = c;
  no_aux.aux_loss_coeff = 0;
  ReferenceWeights with_grad, without_grad;
  reference_loss_and_gradients(c, w, b.tokens, b.targets, kBatch, &with_grad);
  reference_loss_and_gradients(no_aux, w, b.tokens, b.targets, kBatch, &without_grad);
  // Last layer: nothing above it depends on the aux term, so the difference is
  // the aux term's dWr = sum_t dz_t m_t^T (to rounding) with
  // dz_ti = p_i (a_i - sum_l p_l a_l), a_i = alpha N f_i / T:
  // a = 1e-2 x 4 x (1/2, 1/2, 0, 0) / 10 = (2e-3, 2e-3, 0, 0), p = 1/4, so
  // dz_t = (2.5e-4, 2.5e-4, -2.5e-4, -2.5e-4) for every token: rows 0 and 1 of
  // the difference are 2.5e-4 sum_t m_t, rows 2 and 3 their negation.
  const std::vector<double>& with = with_grad.layers[1].router_weight;
  const std::vector<double>& without = without_grad.layers[1].router_weight;
  for (int i = 0; i < c.hidden; ++i) {
    const double column = with[i] - without[i];  // expert 0
    EXPECT_NE(column, 0.0);
    EXPECT_NEAR(with[c.hidden + i] - without[c.hidden + i], column, 1e-15);        // expert 1: the same
    EXPECT_NEAR(with[2 * c.hidden + i] - without[2 * c.hidden + i], -column, 1e-15);  // experts 2, 3: opposite
    EXPECT_NEAR(with[3 * c.hidden + i] - without[3 * c.hidden + i], -column, 1e-15);
  }
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

  ReferenceConfig m = moe_config(Family::kLlama, true, 0);
  m.num_layers = 1;
  ReferenceWeights mw = reference_random_weights(m, 1, 0.1);
  EXPECT_EQ(tensor_names(mw, m),
            (std::vector<std::string>{"wte", "layers.0.norm1_gamma", "layers.0.qkv_weight",
                                      "layers.0.proj_weight", "layers.0.norm2_gamma", "layers.0.router_weight",
                                      "layers.0.expert_fc1_weight", "layers.0.expert_fc2_weight",
                                      "final_norm_gamma"}));
  EXPECT_EQ(tensor(mw, m, "layers.0.router_weight").size(), 4u * 16);         // (experts, hidden)
  EXPECT_EQ(tensor(mw, m, "layers.0.expert_fc1_weight").size(), 4u * 16 * 16);  // (4 x [gate | up] 2 x 8, 16)
  EXPECT_EQ(tensor(mw, m, "layers.0.expert_fc2_weight").size(), 4u * 16 * 8);   // (4 x 16, 8)
  EXPECT_TRUE(mw.layers[0].fc1_weight.empty());

  ReferenceConfig gm = moe_config(Family::kGpt, true, 0);
  gm.num_layers = 1;
  ReferenceWeights gmw = reference_random_weights(gm, 1, 0.1);
  EXPECT_EQ(tensor_names(gmw, gm),
            (std::vector<std::string>{"wte", "wpe", "layers.0.norm1_gamma", "layers.0.norm1_beta",
                                      "layers.0.qkv_weight", "layers.0.qkv_bias", "layers.0.proj_weight",
                                      "layers.0.proj_bias", "layers.0.norm2_gamma", "layers.0.norm2_beta",
                                      "layers.0.router_weight", "layers.0.expert_fc1_weight",
                                      "layers.0.expert_fc2_weight", "final_norm_gamma", "final_norm_beta"}));
  EXPECT_EQ(tensor(gmw, gm, "layers.0.expert_fc1_weight").size(), 4u * 8 * 16);  // GELU: (4 x 8, 16)
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

  ReferenceConfig moe = moe_config(Family::kLlama, true, -1);
  moe.topk = 5;
  moe.expert_ffn = 0;
  try {
    reference_random_weights(moe, 1, 0.1);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "reference model: topk (5) must be in [1, experts 4]; expert_ffn (0) must be positive; "
                 "aux_loss_coeff (-1.000000) must not be negative");
  }
}

}  // namespace
}  // namespace sextant::engine::testing
