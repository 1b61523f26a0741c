// The measured expert_load_factor: each ep rank's block of experts summed over
// the MoE layers, and the busiest rank's rows over one rank's routed pairs.
#include "engine/model/expert_load.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace sextant::engine {
namespace {

TEST(ExpertLoad, EachEpRankSumsItsBlockOfExpertsOverTheLayers) {
  // Two MoE layers of 4 experts: ep 2 holds experts {0, 1} and {2, 3}.
  const std::vector<std::vector<std::int64_t>> rows = {{10, 20, 30, 40}, {1, 2, 3, 4}};
  EXPECT_EQ(rows_by_ep_rank(rows, 2), (std::vector<double>{33, 77}));
  EXPECT_EQ(rows_by_ep_rank(rows, 4), (std::vector<double>{11, 22, 33, 44}));
  EXPECT_EQ(rows_by_ep_rank(rows, 1), (std::vector<double>{110}));
  EXPECT_THROW(rows_by_ep_rank(rows, 3), std::invalid_argument);
  EXPECT_TRUE(rows_by_ep_rank({}, 2) == (std::vector<double>{0, 0}));
}

TEST(ExpertLoad, TheBusiestRanksRowsOverOneRanksPairs) {
  // ep 2 over two sources routing 100 pairs each (layers and passes summed):
  // ranks got 120 and 80 rows, so the busiest has 1.2 times one rank's pairs.
  EXPECT_DOUBLE_EQ(expert_load_factor(std::vector<double>{120, 80}, 100), 1.2);
  // One dropless rank: its experts run every pair it routed.
  EXPECT_DOUBLE_EQ(expert_load_factor(std::vector<double>{100}, 100), 1.0);
  // A capacity dropped 15 % of the pairs: the factor falls below 1.
  EXPECT_DOUBLE_EQ(expert_load_factor(std::vector<double>{85}, 100), 0.85);
  EXPECT_EQ(expert_load_factor(std::vector<double>{}, 100), 0.0);
  EXPECT_EQ(expert_load_factor(std::vector<double>{5}, 0), 0.0);
}

}  // namespace
}  // namespace sextant::engine
