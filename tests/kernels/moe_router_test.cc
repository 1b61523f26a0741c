// The MoE router's forward against a double-precision CPU router
// (moe_router_reference.h), and its backward against central differences of a
// double-precision forward: the gradient formulas in kernels/moe_router.cu are
// checked by differentiation, not restated.
//
// Tolerances:
// - ids and counts: exact (the softmax router ranks the same fp32 logits as the
//   reference; sigmoid rows are drawn so their top scores are >= 2e-6 apart, 20x
//   the fp32 error of sigmoid(x) + bias).
// - weights, lse, score sums: rtol 1e-5 + atol 1e-6. fp32 expf/logf are within a
//   few ulp (~2e-7 relative) and the sums run over at most 1024 terms of one sign.
// - dlogits: |error| <= 1e-3 |want| + 2e-5 max|want| (per case and term). The
//   kernel's fp32 terms carry ~1e-6 relative error, the cancellation in g_j - sum q g
//   about 1e-7 of the largest term; the central differences (h = 1e-4 in double)
//   are exact to ~1e-8 relative. A wrong formula is off by O(1) of max|want|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_router.h"
#include "tests/kernels/gpu_test_support.h"
#include "tests/kernels/moe_router_reference.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  const char* name;
  int tokens, experts, topk;
  MoeScoreFunction score;
  bool normalize, bias;
  float scaling;
  int aux_group_tokens;  // 0: all tokens
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // for the test list

MoeRouterOptions options(const Case& c) {
  MoeRouterOptions o;
  o.topk = c.topk;
  o.score_function = c.score;
  o.normalize_topk = c.normalize;
  o.scaling_factor = c.scaling;
  return o;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// What the backward differentiates, for one token's logits x (the selection held
// fixed): sum_j g_j w_j(x) + sum_i a_i p_i(x) + zc lse(x)^2, from the definitions.
struct RowObjective {
  const Case& c;
  const std::int32_t* ids;  // (topk)
  const double* g;          // (topk) or null
  const double* a;          // (experts) or null
  double zc;

  double operator()(const std::vector<double>& x) const {
    const int E = c.experts, k = c.topk;
    const double m = *std::max_element(x.begin(), x.end());
    double exp_sum = 0, sig_sum = 0;
    for (int i = 0; i < E; ++i) exp_sum += std::exp(x[i] - m), sig_sum += sigmoid(x[i]);
    const double lse = m + std::log(exp_sum);
    double f = zc * lse * lse;
    if (g != nullptr) {
      std::vector<double> chosen(k);
      for (int j = 0; j < k; ++j)
        chosen[j] = c.score == MoeScoreFunction::kSigmoid ? sigmoid(x[ids[j]]) : std::exp(x[ids[j]] - lse);
      double sum = 0;
      for (double v : chosen) sum += v;
      if (c.score == MoeScoreFunction::kSigmoid) sum += 1e-20;
      for (int j = 0; j < k; ++j) f += g[j] * c.scaling * (c.normalize ? chosen[j] / sum : chosen[j]);
    }
    if (a != nullptr)
      for (int i = 0; i < E; ++i)
        f += a[i] * (c.score == MoeScoreFunction::kSigmoid ? sigmoid(x[i]) / sig_sum : std::exp(x[i] - lse));
    return f;
  }
};

std::vector<double> central_differences(const RowObjective& f, const float* row, int experts) {
  constexpr double kStep = 1e-4;
  std::vector<double> x(row, row + experts), d(experts);
  for (int i = 0; i < experts; ++i) {
    const double keep = x[i];
    x[i] = keep + kStep;
    const double up = f(x);
    x[i] = keep - kStep;
    const double down = f(x);
    x[i] = keep;
    d[i] = (up - down) / (2 * kStep);
  }
  return d;
}

class MoeRouterTest : public testing::GpuTestWithParam<Case> {
 protected:
  // Logits N(0, 2); the sigmoid router's bias N(0, 0.1), rows separated (see top).
  void draw(const Case& c) {
    logits_ = testing::random_float(rng(), static_cast<std::size_t>(c.tokens) * c.experts, 0.0, 2.0);
    bias_ = c.bias ? testing::random_float(rng(), c.experts, 0.0, 0.1) : std::vector<float>{};
    if (c.score == MoeScoreFunction::kSigmoid)
      testing::separate_sigmoid_scores(logits_, bias_, c.tokens, c.experts, c.topk, 2.0, 2e-6, rng());
  }
  std::vector<float> logits_, bias_;
};

TEST_P(MoeRouterTest, ForwardMatchesReference) {
  const Case c = GetParam();
  draw(c);
  const std::size_t slots = static_cast<std::size_t>(c.tokens) * c.topk;
  DeviceBuffer<float> d_logits(logits_), d_bias(bias_), d_weights(slots), d_lse(c.tokens),
      d_score_sum(c.tokens);
  DeviceBuffer<std::int32_t> d_ids(slots), d_counts(c.experts);

  moe_router_forward(d_ids.get(), d_weights.get(), d_lse.get(), d_score_sum.get(), d_counts.get(),
                     d_logits.get(), c.bias ? d_bias.get() : nullptr, c.tokens, c.experts, options(c),
                     nullptr);

  const testing::RouterReference want = testing::router_reference(logits_, bias_, c.tokens, c.experts, options(c));
  EXPECT_EQ(d_ids.download(), want.ids);
  EXPECT_EQ(d_counts.download(), want.tokens_per_expert);
  EXPECT_TRUE(all_close(to_double(d_weights.download()), want.weights, 1e-5, 1e-6)) << "weights";
  EXPECT_TRUE(all_close(to_double(d_lse.download()), want.lse, 1e-5, 1e-6)) << "lse";
  EXPECT_TRUE(all_close(to_double(d_score_sum.download()), want.score_sum, 1e-5, 1e-6)) << "score sums";
}

// Each gradient term alone (weights, aux loss, z-loss), then all three together.
TEST_P(MoeRouterTest, BackwardMatchesCentralDifferences) {
  const Case c = GetParam();
  draw(c);
  const testing::RouterReference selection =
      testing::router_reference(logits_, bias_, c.tokens, c.experts, options(c));
  const std::size_t slots = static_cast<std::size_t>(c.tokens) * c.topk;
  const std::vector<float> d_weights_host = testing::random_float(rng(), slots, 0.0, 1.0);
  const int group_tokens = c.aux_group_tokens == 0 ? c.tokens : c.aux_group_tokens;
  const int groups = c.tokens / group_tokens;
  const std::vector<double> counts = testing::group_counts(selection.ids, c.tokens, c.experts, c.topk, group_tokens);
  std::vector<float> counts_f(counts.begin(), counts.end());
  DeviceBuffer<float> d_logits(logits_), d_dweights(d_weights_host), d_counts(counts_f),
      d_dlogits(static_cast<std::size_t>(c.tokens) * c.experts);
  DeviceBuffer<std::int32_t> d_ids(selection.ids);
  const float loss_grad_scale = 0.5f;

  struct Terms {
    const char* name;
    bool weights;
    float aux, z;
  };
  for (const Terms terms : {Terms{"weights", true, 0.0f, 0.0f}, Terms{"aux loss", false, 0.3f, 0.0f},
                            Terms{"z-loss", false, 0.0f, 0.05f}, Terms{"all", true, 0.3f, 0.05f}}) {
    SCOPED_TRACE(terms.name);
    MoeRouterLossOptions losses;
    losses.aux_loss_coeff = terms.aux;
    losses.aux_group_tokens = c.aux_group_tokens;
    losses.z_loss_coeff = terms.z;
    moe_router_backward(d_dlogits.get(), d_logits.get(), d_ids.get(), terms.weights ? d_dweights.get() : nullptr,
                        d_counts.get(), c.tokens, c.experts, options(c), losses, loss_grad_scale, nullptr);

    // d(total)/d p_ti = scale alpha N count_gi / (G k S^2); d(total)/d lse_t^2 = scale c_z / T.
    const double a_per_count = static_cast<double>(loss_grad_scale) * terms.aux * c.experts /
                               (static_cast<double>(groups) * c.topk * group_tokens * group_tokens);
    const double zc = static_cast<double>(loss_grad_scale) * terms.z / c.tokens;
    std::vector<double> want;
    want.reserve(logits_.size());
    std::vector<double> g(c.topk), a(c.experts);
    for (int t = 0; t < c.tokens; ++t) {
      for (int j = 0; j < c.topk; ++j) g[j] = d_weights_host[static_cast<std::size_t>(t) * c.topk + j];
      for (int i = 0; i < c.experts; ++i)
        a[i] = a_per_count * counts[static_cast<std::size_t>(t / group_tokens) * c.experts + i];
      const RowObjective f{c, &selection.ids[static_cast<std::size_t>(t) * c.topk], terms.weights ? g.data() : nullptr,
                           terms.aux != 0.0f ? a.data() : nullptr, zc};
      const std::vector<double> row = central_differences(f, &logits_[static_cast<std::size_t>(t) * c.experts], c.experts);
      want.insert(want.end(), row.begin(), row.end());
    }
    double largest = 0;
    for (double v : want) largest = std::max(largest, std::abs(v));
    ASSERT_GT(largest, 0.0);
    EXPECT_TRUE(all_close(to_double(d_dlogits.download()), want, 1e-3, 2e-5 * largest));
  }
}

// Mixtral (softmax top-2, renormalised: Megatron's default); Switch (top-1, the
// plain probability, per-sequence balancing over 4 sequences of 32); Qwen3-MoE
// (128 experts, top-8, renormalised); plain softmax probabilities with a scale;
// DeepSeek-V3 (256 experts, sigmoid + bias, top-8 normalised, scale 2.5, per-sequence
// groups of 40); sigmoid top-1 plain; the widest (1024 experts, top-32); one token.
INSTANTIATE_TEST_SUITE_P(
    Routers, MoeRouterTest,
    ::testing::Values(
        Case{"MixtralSoftmaxTop2", 333, 8, 2, MoeScoreFunction::kSoftmax, true, false, 1.0f, 0},
        Case{"SwitchTop1PerSequence", 128, 16, 1, MoeScoreFunction::kSoftmax, false, false, 1.0f, 32},
        Case{"Qwen3Top8Of128", 256, 128, 8, MoeScoreFunction::kSoftmax, true, false, 1.0f, 0},
        Case{"PreSoftmaxScaled", 64, 64, 6, MoeScoreFunction::kSoftmax, false, false, 16.0f, 16},
        Case{"DeepSeekV3SigmoidBias", 200, 256, 8, MoeScoreFunction::kSigmoid, true, true, 2.5f, 40},
        Case{"SigmoidTop1Plain", 50, 32, 1, MoeScoreFunction::kSigmoid, false, false, 1.0f, 0},
        Case{"Widest1024Top32", 3, 1024, 32, MoeScoreFunction::kSigmoid, true, true, 1.0f, 0},
        Case{"OneToken", 1, 8, 2, MoeScoreFunction::kSoftmax, true, false, 1.0f, 0},
        // The forward keeps ceil(experts / 32) logits per lane, rounded up to a
        // power of two: 40 experts (2 per lane, some lanes' second empty) and 1000
        // (32 per lane); 6000 tokens are more than the grid's warps on an H100
        // (4 blocks of 8 warps per SM, 132 SMs), so warps take several tokens.
        Case{"Softmax40Top3", 97, 40, 3, MoeScoreFunction::kSoftmax, true, false, 1.0f, 0},
        Case{"Sigmoid1000Top4", 20, 1000, 4, MoeScoreFunction::kSigmoid, true, true, 1.0f, 0},
        Case{"ManyTokensTop2Of8", 6000, 8, 2, MoeScoreFunction::kSoftmax, true, false, 1.0f, 1000}),
    case_name);

class MoeRouterEdgeTest : public testing::GpuTest {};

// Equal logits: every expert ties, so the lowest indices win, in order, each with
// weight 1/k (renormalised) -- and the counts say so.
TEST_F(MoeRouterEdgeTest, TiesGoToTheLowerIndex) {
  const int tokens = 5, experts = 8;
  MoeRouterOptions o;
  o.topk = 3;
  DeviceBuffer<float> d_logits(std::vector<float>(tokens * experts, 0.25f)), d_weights(tokens * 3),
      d_lse(tokens), d_score_sum(tokens);
  DeviceBuffer<std::int32_t> d_ids(tokens * 3), d_counts(experts);
  moe_router_forward(d_ids.get(), d_weights.get(), d_lse.get(), d_score_sum.get(), d_counts.get(),
                     d_logits.get(), nullptr, tokens, experts, o, nullptr);
  const std::vector<std::int32_t> ids = d_ids.download();
  for (int t = 0; t < tokens; ++t)
    EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 3 * t, ids.begin() + 3 * t + 3),
              (std::vector<std::int32_t>{0, 1, 2}));
  for (float w : d_weights.download()) EXPECT_NEAR(w, 1.0 / 3, 1e-7);
  EXPECT_EQ(d_counts.download(), (std::vector<std::int32_t>{5, 5, 5, 0, 0, 0, 0, 0}));
  // lse of 8 equal logits: 0.25 + ln 8.
  for (float l : d_lse.download()) EXPECT_NEAR(l, 0.25 + std::log(8.0), 1e-6);
}

// Ties across lanes (logits from four values, -0 and +0 among them, which tie
// as they compare equal): the lowest indices of the largest value come first,
// as the reference ranks them.
TEST_F(MoeRouterEdgeTest, TiesAcrossLanesGoToTheLowerIndex) {
  const int tokens = 300, experts = 128;
  MoeRouterOptions o;
  o.topk = 8;
  const float values[] = {-0.0f, 0.0f, 0.5f, 1.0f};
  std::vector<float> logits(static_cast<std::size_t>(tokens) * experts);
  for (float& x : logits) x = values[rng()() % 4];
  DeviceBuffer<float> d_logits(logits), d_weights(tokens * o.topk), d_lse(tokens), d_score_sum(tokens);
  DeviceBuffer<std::int32_t> d_ids(tokens * o.topk), d_counts(experts);
  moe_router_forward(d_ids.get(), d_weights.get(), d_lse.get(), d_score_sum.get(), d_counts.get(),
                     d_logits.get(), nullptr, tokens, experts, o, nullptr);
  const testing::RouterReference want = testing::router_reference(logits, {}, tokens, experts, o);
  EXPECT_EQ(d_ids.download(), want.ids);
  EXPECT_EQ(d_counts.download(), want.tokens_per_expert);
  // A row of zeros of both signs: the first k indices.
  std::vector<float> zeros(experts);
  for (int i = 0; i < experts; ++i) zeros[i] = i % 2 == 0 ? -0.0f : 0.0f;
  DeviceBuffer<float> d_zeros(zeros);
  moe_router_forward(d_ids.get(), d_weights.get(), d_lse.get(), d_score_sum.get(), d_counts.get(), d_zeros.get(),
                     nullptr, 1, experts, o, nullptr);
  const std::vector<std::int32_t> ids = d_ids.download();
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin(), ids.begin() + o.topk),
            (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// One expert: every token takes it with weight 1, and lse is the logit itself
// (log of exp(0) = 1 is 0).
TEST_F(MoeRouterEdgeTest, OneExpert) {
  const int tokens = 37;
  MoeRouterOptions o;
  o.topk = 1;
  const std::vector<float> logits = testing::random_float(rng(), tokens, 0.0, 2.0);
  DeviceBuffer<float> d_logits(logits), d_weights(tokens), d_lse(tokens), d_score_sum(tokens);
  DeviceBuffer<std::int32_t> d_ids(tokens), d_counts(1);
  moe_router_forward(d_ids.get(), d_weights.get(), d_lse.get(), d_score_sum.get(), d_counts.get(),
                     d_logits.get(), nullptr, tokens, 1, o, nullptr);
  EXPECT_EQ(d_ids.download(), std::vector<std::int32_t>(tokens, 0));
  EXPECT_EQ(d_weights.download(), std::vector<float>(tokens, 1.0f));
  EXPECT_EQ(d_lse.download(), logits);
  EXPECT_EQ(d_counts.download(), std::vector<std::int32_t>{tokens});
}

// No tokens: the counts are still written (zeros) and nothing else is touched.
TEST_F(MoeRouterEdgeTest, NoTokensZeroesTheCounts) {
  DeviceBuffer<std::int32_t> d_counts(std::vector<std::int32_t>(4, 7));
  moe_router_forward(nullptr, nullptr, nullptr, nullptr, d_counts.get(), nullptr, nullptr, 0, 4,
                     MoeRouterOptions{}, nullptr);
  EXPECT_EQ(d_counts.download(), std::vector<std::int32_t>(4, 0));
}

// Argument checks run before any CUDA call, so these need no GPU.
TEST(MoeRouterArguments, NameWhatIsWrong) {
  MoeRouterOptions o;
  o.topk = 9;
  try {
    moe_router_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 4, 8, o, nullptr);
    FAIL() << "topk 9 of 8 experts was accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_router_forward: topk (9) must be in [1, min(experts (8), 32)]");
  }
  o.topk = 2;
  float bias = 0;
  EXPECT_THROW(moe_router_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &bias, 4, 8, o, nullptr),
               KernelArgumentError)
      << "a bias on the softmax router";
  EXPECT_THROW(moe_router_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 4, 2000, o,
                                  nullptr),
               KernelArgumentError)
      << "more experts than kMoeMaxExperts";
  MoeRouterLossOptions losses;
  losses.aux_loss_coeff = 0.01f;
  losses.aux_group_tokens = 3;
  float one = 0;
  std::int32_t id = 0;
  try {
    moe_router_backward(&one, &one, &id, nullptr, &one, 4, 8, o, losses, 1.0f, nullptr);
    FAIL() << "groups of 3 tokens over 4 tokens were accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_router_backward: aux_group_tokens (3) must divide tokens (4)");
  }
}

}  // namespace
}  // namespace sextant::kernels
