#include "engine/launch/rank_map.h"

#include <gtest/gtest.h>

namespace sextant::engine::launch {
namespace {

TEST(RankMap, EightRanksOnTwoNodes) {
  // tp=2, dp=2, pp=2, ep=2: rank 5 = tp 1 + 2·(dp 0 + 2·pp 1); its stage rank 1 is ep 1.
  sim::ParallelLayout l;
  l.tp = 2, l.dp = 2, l.pp = 2, l.ep = 2;
  std::vector<RankPlacement> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({r < 4 ? "dgx01" : "dgx02", r % 4});
  EXPECT_EQ(rank_map_table(ranks, l),
            "rank  host   gpu  tp  cp  ep  dp  pp\n"
            "   0  dgx01    0   0   0   0   0   0\n"
            "   1  dgx01    1   1   0   1   0   0\n"
            "   2  dgx01    2   0   0   0   1   0\n"
            "   3  dgx01    3   1   0   1   1   0\n"
            "   4  dgx02    0   0   0   0   0   1\n"
            "   5  dgx02    1   1   0   1   0   1\n"
            "   6  dgx02    2   0   0   0   1   1\n"
            "   7  dgx02    3   1   0   1   1   1\n");
}

TEST(RankMap, PlacementLinesRoundTrip) {
  const RankPlacement p = parse_placement_line(placement_line({"node 7", 3}));
  EXPECT_EQ(p.host, "node 7");
  EXPECT_EQ(p.gpu, 3);
}

}  // namespace
}  // namespace sextant::engine::launch
