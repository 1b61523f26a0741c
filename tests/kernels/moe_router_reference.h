// A double-precision CPU router for the MoE kernel tests, written from the
// definitions in kernels/moe_router.h and kernels/moe_load_balancing.h (softmax
// over all experts, then top-k, then renormalisation; the sigmoid scores with
// the selection bias), not from the kernels' own arithmetic.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/moe_router.h"

namespace sextant::kernels::testing {

struct RouterReference {
  std::vector<std::int32_t> ids;     // (tokens, topk)
  std::vector<double> weights;       // (tokens, topk)
  std::vector<double> lse;           // (tokens)
  std::vector<double> score_sum;     // (tokens): sum of sigmoid scores, 1 for softmax
  std::vector<std::int32_t> tokens_per_expert;  // (experts)
};

/// Selection by descending score, ties to the lower index. The softmax router
/// ranks the logits themselves (the same floats the kernel ranks); the sigmoid
/// router ranks sigmoid(x) + bias in double, which agrees with the kernel's fp32
/// ranking on rows separate_sigmoid_scores has drawn. bias: (experts) or empty.
RouterReference router_reference(const std::vector<float>& logits, const std::vector<float>& bias,
                                 int tokens, int experts, const MoeRouterOptions& options);

/// p_ti: the softmax of the logits, or the sigmoid scores over their row sum. (tokens, experts)
std::vector<double> balancing_probabilities(const std::vector<float>& logits, int tokens, int experts,
                                            MoeScoreFunction score_function);

/// count_gi: how many tokens of group g (group_tokens consecutive tokens) chose expert i.
/// (tokens / group_tokens, experts)
std::vector<double> group_counts(const std::vector<std::int32_t>& ids, int tokens, int experts, int topk,
                                 int group_tokens);

/// Redraws (N(0, stddev)) every row whose top topk + 1 sigmoid selection scores
/// (sigmoid(x) + bias) are not at least `gap` apart, so a ranking in fp32 (errors
/// of ~1e-7) cannot differ from the double one.
void separate_sigmoid_scores(std::vector<float>& logits, const std::vector<float>& bias, int tokens,
                             int experts, int topk, double stddev, double gap, std::mt19937_64& rng);

}  // namespace sextant::kernels::testing
