// The routing map against a CPU reference that follows the definitions in
// kernels/moe_routing_map.h literally: for each expert in order, the tokens that
// chose it in token order; with a capacity, those kept by the drop policy. All
// outputs are integers, compared exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_routing_map.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;

struct Map {
  std::vector<std::int32_t> token_rows, kept, rows;
};

Map reference(const std::vector<std::int32_t>& ids, const std::vector<float>& weights, int tokens, int topk,
              int experts, const MoeRoutingOptions& o) {
  Map m{std::vector<std::int32_t>(ids.size(), -1), std::vector<std::int32_t>(experts),
        std::vector<std::int32_t>(experts)};
  std::int32_t next_row = 0;
  for (int e = 0; e < experts; ++e) {
    std::vector<int> slots;  // the pairs that chose e, in token order
    for (int s = 0; s < tokens * topk; ++s)
      if (ids[s] == e) slots.push_back(s);
    std::vector<int> kept = slots;
    if (o.capacity > 0 && static_cast<int>(slots.size()) > o.capacity) {
      if (o.drop_policy == MoeDropPolicy::kPosition) {
        kept.resize(o.capacity);
      } else {  // the largest weights, earlier tokens first among equals
        std::stable_sort(kept.begin(), kept.end(), [&](int a, int b) { return weights[a] > weights[b]; });
        kept.resize(o.capacity);
        std::sort(kept.begin(), kept.end());
      }
    }
    m.kept[e] = static_cast<std::int32_t>(kept.size());
    const int multiple = o.rows_multiple;
    m.rows[e] = o.pad_to_capacity ? o.capacity : (m.kept[e] + multiple - 1) / multiple * multiple;
    for (std::size_t r = 0; r < kept.size(); ++r) m.token_rows[kept[r]] = next_row + static_cast<std::int32_t>(r);
    next_row += m.rows[e];
  }
  return m;
}

struct Case {
  const char* name;
  int tokens, topk, experts;
  int capacity;
  MoeDropPolicy policy;
  bool pad;
  enum class Load { kUniform, kSkewed, kSomeExpertsUnused, kAllToOne, kFewWeightValues } load;
  int rows_multiple = 1;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // for the test list

class MoeRoutingMapTest : public testing::GpuTestWithParam<Case> {
 protected:
  // Distinct experts per token, drawn by the case's load; weights in (0, 1].
  void draw(const Case& c) {
    ids_.assign(static_cast<std::size_t>(c.tokens) * c.topk, 0);
    weights_.assign(ids_.size(), 0.0f);
    std::uniform_real_distribution<float> weight(0.01f, 1.0f);
    std::uniform_int_distribution<int> few(1, 4);
    std::vector<int> experts(c.experts);
    for (int t = 0; t < c.tokens; ++t) {
      std::iota(experts.begin(), experts.end(), 0);
      std::shuffle(experts.begin(), experts.end(), rng());
      if (c.load == Case::Load::kSkewed || c.load == Case::Load::kAllToOne) {
        // expert 0 first for 3 tokens in 4 (all of them for kAllToOne)
        if (c.load == Case::Load::kAllToOne || rng()() % 4 != 0)
          std::swap(*std::find(experts.begin(), experts.end(), 0), experts[0]);
      }
      if (c.load == Case::Load::kSomeExpertsUnused) {  // only the even experts
        std::stable_partition(experts.begin(), experts.end(), [](int e) { return e % 2 == 0; });
      }
      for (int j = 0; j < c.topk; ++j) {
        const std::size_t s = static_cast<std::size_t>(t) * c.topk + j;
        ids_[s] = experts[j];
        weights_[s] = c.load == Case::Load::kFewWeightValues ? 0.25f * few(rng()) : weight(rng());
      }
    }
  }
  std::vector<std::int32_t> ids_;
  std::vector<float> weights_;
};

TEST_P(MoeRoutingMapTest, MatchesReference) {
  const Case c = GetParam();
  draw(c);
  MoeRoutingOptions o;
  o.capacity = c.capacity;
  o.drop_policy = c.policy;
  o.pad_to_capacity = c.pad;
  o.rows_multiple = c.rows_multiple;
  DeviceBuffer<std::int32_t> d_ids(ids_), d_rows(ids_.size()), d_kept(c.experts), d_expert_rows(c.experts);
  DeviceBuffer<float> d_weights(weights_);
  const std::size_t workspace_bytes = moe_routing_map_workspace_bytes(c.tokens, c.topk, c.experts);
  DeviceBuffer<char> workspace(workspace_bytes);

  moe_routing_map(d_rows.get(), d_kept.get(), d_expert_rows.get(), d_ids.get(), d_weights.get(), c.tokens, c.topk,
                  c.experts, o, workspace.get(), workspace_bytes, nullptr);

  const Map want = reference(ids_, weights_, c.tokens, c.topk, c.experts, o);
  EXPECT_EQ(d_kept.download(), want.kept);
  EXPECT_EQ(d_expert_rows.download(), want.rows);
  EXPECT_EQ(d_rows.download(), want.token_rows);
  // What the reference implies, said outright: kept rows are distinct and inside the bound.
  std::vector<std::int32_t> used;
  for (std::int32_t r : want.token_rows)
    if (r >= 0) used.push_back(r);
  std::sort(used.begin(), used.end());
  EXPECT_EQ(std::adjacent_find(used.begin(), used.end()), used.end());
  if (!used.empty()) {
    EXPECT_LT(used.back(), moe_permuted_rows_bound(c.tokens, c.topk, c.experts, o));
  }
}

// Capacities: 1000 tokens x top-2 over 8 experts is 250 pairs per expert on
// average; capacity factor 1.0 gives 250 (moe_expert_capacity), and the skewed
// load sends ~750 + to expert 0, which overflows it.
INSTANTIATE_TEST_SUITE_P(
    Loads, MoeRoutingMapTest,
    ::testing::Values(
        Case{"DroplessUniform", 1000, 4, 16, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform},
        Case{"DroplessEmptyExperts", 300, 2, 8, 0, MoeDropPolicy::kProbs, false, Case::Load::kSomeExpertsUnused},
        Case{"DroplessOneToken", 1, 2, 8, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform},
        Case{"DroplessAllToOneExpert", 777, 1, 8, 0, MoeDropPolicy::kProbs, false, Case::Load::kAllToOne},
        Case{"Top8Of128", 512, 8, 128, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform},
        Case{"CapacityOverflowByPosition", 1000, 2, 8, 250, MoeDropPolicy::kPosition, false, Case::Load::kSkewed},
        Case{"CapacityOverflowByProbs", 1000, 2, 8, 250, MoeDropPolicy::kProbs, false, Case::Load::kSkewed},
        Case{"ProbsTiesGoToEarlierTokens", 400, 2, 4, 150, MoeDropPolicy::kProbs, false,
             Case::Load::kFewWeightValues},
        Case{"PaddedByProbs", 1000, 2, 8, 250, MoeDropPolicy::kProbs, true, Case::Load::kSkewed},
        Case{"PaddedByPositionEmptyExperts", 200, 2, 8, 60, MoeDropPolicy::kPosition, true,
             Case::Load::kSomeExpertsUnused},
        Case{"AllToOneOverCapacity", 500, 1, 4, 125, MoeDropPolicy::kProbs, true, Case::Load::kAllToOne},
        // Blocks rounded up to 8 rows (the engine's layout for cuBLAS's grouped weight gradient).
        Case{"RowsMultipleOf8", 1000, 4, 16, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform, 8},
        Case{"RowsMultipleOf8EmptyExperts", 301, 2, 8, 0, MoeDropPolicy::kProbs, false,
             Case::Load::kSomeExpertsUnused, 8},
        Case{"RowsMultipleOf8Top8Of128", 509, 8, 128, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform, 8},
        Case{"RowsMultipleOf8WithDrops", 1000, 2, 8, 250, MoeDropPolicy::kPosition, false, Case::Load::kSkewed,
             8},
        // The counting sort (kernels/moe_routing_map.cu) cuts the pairs into chunks of
        // 1024, more when there would be over 128 chunks. One expert; 1024 experts
        // (24000 pairs: 23 whole chunks and one of 448); one token of 32 choices;
        // 140002 pairs (chunks of 2048, the last partial); every pair to one expert
        // over 5 chunks; capacities that overflow in the middle of a chunk after
        // several (skewed: ~4900 of 12000 pairs to expert 0, capacity 1500).
        Case{"OneExpert", 100, 1, 1, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform},
        Case{"Top8Of1024", 3000, 8, 1024, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform},
        Case{"OneTokenTop32Of1024", 1, 32, 1024, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform},
        Case{"WiderChunks", 70001, 2, 16, 0, MoeDropPolicy::kProbs, false, Case::Load::kSkewed},
        Case{"AllToOneExpertAcrossChunks", 5000, 1, 4, 0, MoeDropPolicy::kProbs, false, Case::Load::kAllToOne},
        Case{"CapacityOverflowByPositionAcrossChunks", 6000, 2, 8, 1500, MoeDropPolicy::kPosition, false,
             Case::Load::kSkewed},
        Case{"CapacityOverflowByProbsAcrossChunks", 6000, 2, 8, 1500, MoeDropPolicy::kProbs, false,
             Case::Load::kSkewed},
        Case{"PaddedByPositionTop8Of128", 2048, 8, 128, 128, MoeDropPolicy::kPosition, true, Case::Load::kSkewed},
        Case{"PaddedByProbsTop8Of128", 2048, 8, 128, 128, MoeDropPolicy::kProbs, true, Case::Load::kSkewed},
        Case{"RowsMultipleOf8WiderChunks", 70001, 2, 16, 0, MoeDropPolicy::kProbs, false, Case::Load::kUniform, 8},
        Case{"RowsMultipleOf8Top8Of1024", 3001, 8, 1024, 0, MoeDropPolicy::kPosition, false, Case::Load::kSkewed,
             8}),
    case_name);

class MoeRoutingMapEdgeTest : public testing::GpuTest {};

TEST_F(MoeRoutingMapEdgeTest, NoTokens) {
  MoeRoutingOptions o;
  o.capacity = 3;
  o.pad_to_capacity = true;
  DeviceBuffer<std::int32_t> d_kept(4), d_expert_rows(4);
  const std::size_t workspace_bytes = moe_routing_map_workspace_bytes(0, 2, 4);
  DeviceBuffer<char> workspace(workspace_bytes);
  moe_routing_map(nullptr, d_kept.get(), d_expert_rows.get(), nullptr, nullptr, 0, 2, 4, o, workspace.get(),
                  workspace_bytes, nullptr);
  EXPECT_EQ(d_kept.download(), std::vector<std::int32_t>(4, 0));
  EXPECT_EQ(d_expert_rows.download(), std::vector<std::int32_t>(4, 3));  // padded even when empty
}

// Megatron-Core's get_capacity: ceil(tokens * topk / experts * factor).
TEST(MoeExpertCapacity, FollowsMegatron) {
  EXPECT_EQ(moe_expert_capacity(1000, 2, 8, 1.0), 250);   // 2000 / 8
  EXPECT_EQ(moe_expert_capacity(1000, 2, 8, 1.25), 313);  // 312.5 up
  EXPECT_EQ(moe_expert_capacity(4096, 8, 128, 1.0), 256);
  EXPECT_EQ(moe_expert_capacity(3, 1, 8, 1.0), 1);        // 0.375 up
  EXPECT_EQ(moe_expert_capacity(3, 1, 8, 1.0, 4), 4);     // min_capacity
  EXPECT_THROW(moe_expert_capacity(100, 2, 8, 0.0), KernelArgumentError);
  MoeRoutingOptions padded;
  padded.capacity = 313;
  padded.pad_to_capacity = true;
  EXPECT_EQ(moe_permuted_rows_bound(1000, 2, 8, padded), 8 * 313);
  EXPECT_EQ(moe_permuted_rows_bound(1000, 2, 8, MoeRoutingOptions{}), 2000);
  MoeRoutingOptions multiple;
  multiple.rows_multiple = 8;
  EXPECT_EQ(moe_permuted_rows_bound(1000, 2, 8, multiple), 2000 + 8 * 7);  // at most 7 more rows per expert
}

TEST(MoeRoutingMapArguments, NameWhatIsWrong) {
  MoeRoutingOptions o;
  o.pad_to_capacity = true;
  std::int32_t one = 0;
  try {
    moe_routing_map(&one, &one, &one, &one, nullptr, 1, 1, 4, o, nullptr, 0, nullptr);
    FAIL() << "padding without a capacity was accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_routing_map: pad_to_capacity needs a capacity");
  }
  o.pad_to_capacity = false;
  o.rows_multiple = 0;
  try {
    moe_routing_map(&one, &one, &one, &one, nullptr, 1, 1, 4, o, nullptr, 0, nullptr);
    FAIL() << "rows_multiple 0 was accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_routing_map: rows_multiple (0) must be >= 1");
  }
  o.rows_multiple = 1;
  EXPECT_THROW(moe_routing_map(&one, &one, &one, &one, nullptr, 1, 5, 4, o, nullptr, 0, nullptr),
               KernelArgumentError)
      << "topk above the expert count";
  o.capacity = 2;
  EXPECT_THROW(moe_routing_map(&one, &one, &one, &one, nullptr, 1, 1, 4, o, nullptr, 0, nullptr),
               KernelArgumentError)
      << "the kProbs policy without weights";
}

}  // namespace
}  // namespace sextant::kernels
