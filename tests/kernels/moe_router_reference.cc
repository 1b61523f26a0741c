#include "tests/kernels/moe_router_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sextant::kernels::testing {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Expert indices by descending score, ties to the lower index.
std::vector<int> ranking(const std::vector<double>& scores) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  return order;
}

std::vector<double> selection_scores(const float* x, const std::vector<float>& bias, int experts,
                                     MoeScoreFunction score_function) {
  std::vector<double> s(experts);
  for (int i = 0; i < experts; ++i)
    s[i] = score_function == MoeScoreFunction::kSoftmax
               ? x[i]
               : sigmoid(x[i]) + (bias.empty() ? 0.0 : static_cast<double>(bias[i]));
  return s;
}

}  // namespace

RouterReference router_reference(const std::vector<float>& logits, const std::vector<float>& bias,
                                 int tokens, int experts, const MoeRouterOptions& o) {
  RouterReference r;
  r.ids.resize(static_cast<std::size_t>(tokens) * o.topk);
  r.weights.resize(r.ids.size());
  r.lse.resize(tokens);
  r.score_sum.resize(tokens);
  r.tokens_per_expert.assign(experts, 0);
  const bool sigmoid_router = o.score_function == MoeScoreFunction::kSigmoid;
  for (int t = 0; t < tokens; ++t) {
    const float* x = &logits[static_cast<std::size_t>(t) * experts];
    const double m = *std::max_element(x, x + experts);
    double exp_sum = 0, score_sum = 0;
    for (int i = 0; i < experts; ++i) exp_sum += std::exp(x[i] - m), score_sum += sigmoid(x[i]);
    r.lse[t] = m + std::log(exp_sum);
    r.score_sum[t] = sigmoid_router ? score_sum : 1.0;
    const std::vector<int> order = ranking(selection_scores(x, bias, experts, o.score_function));
    // The score each selected expert contributes: its probability or sigmoid score.
    std::vector<double> chosen(o.topk);
    for (int j = 0; j < o.topk; ++j) {
      const int e = order[j];
      chosen[j] = sigmoid_router ? sigmoid(x[e]) : std::exp(x[e] - r.lse[t]);
      r.ids[static_cast<std::size_t>(t) * o.topk + j] = e;
      ++r.tokens_per_expert[e];
    }
    const double sum = std::accumulate(chosen.begin(), chosen.end(), 0.0) + (sigmoid_router ? 1e-20 : 0.0);
    for (int j = 0; j < o.topk; ++j)
      r.weights[static_cast<std::size_t>(t) * o.topk + j] =
          o.scaling_factor * (o.normalize_topk ? chosen[j] / sum : chosen[j]);
  }
  return r;
}

std::vector<double> balancing_probabilities(const std::vector<float>& logits, int tokens, int experts,
                                            MoeScoreFunction score_function) {
  std::vector<double> p(logits.size());
  for (int t = 0; t < tokens; ++t) {
    const float* x = &logits[static_cast<std::size_t>(t) * experts];
    double* row = &p[static_cast<std::size_t>(t) * experts];
    const double m = *std::max_element(x, x + experts);
    double sum = 0;
    for (int i = 0; i < experts; ++i) {
      row[i] = score_function == MoeScoreFunction::kSoftmax ? std::exp(x[i] - m) : sigmoid(x[i]);
      sum += row[i];
    }
    for (int i = 0; i < experts; ++i) row[i] /= sum;
  }
  return p;
}

std::vector<double> group_counts(const std::vector<std::int32_t>& ids, int tokens, int experts, int topk,
                                 int group_tokens) {
  std::vector<double> counts(static_cast<std::size_t>(tokens / group_tokens) * experts, 0.0);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < topk; ++j)
      counts[static_cast<std::size_t>(t / group_tokens) * experts + ids[static_cast<std::size_t>(t) * topk + j]] += 1;
  return counts;
}

void separate_sigmoid_scores(std::vector<float>& logits, const std::vector<float>& bias, int tokens,
                             int experts, int topk, double stddev, double gap, std::mt19937_64& rng) {
  std::normal_distribution<double> draw(0.0, stddev);
  const int ranked = std::min(topk + 1, experts);
  for (int t = 0; t < tokens; ++t) {
    float* x = &logits[static_cast<std::size_t>(t) * experts];
    for (;;) {
      std::vector<double> s = selection_scores(x, bias, experts, MoeScoreFunction::kSigmoid);
      std::sort(s.begin(), s.end(), std::greater<>());
      bool separated = true;
      for (int j = 0; j + 1 < ranked; ++j) separated = separated && s[j] - s[j + 1] >= gap;
      if (separated) break;
      for (int i = 0; i < experts; ++i) x[i] = static_cast<float>(draw(rng));
    }
  }
}

}  // namespace sextant::kernels::testing
