#include "sim/comm/collective_cost.h"

#include <gtest/gtest.h>

#include "sim/comm/group_placement.h"

namespace sextant::sim {
namespace {

const LinkRates kRates{100e9, 25e9, 3e-6, 6e-6};
constexpr double kMiB = 1024.0 * 1024.0;

TEST(GroupPlacement, ByStride) {
  // tp=8 on 8-GPU nodes: one node.
  GroupPlacement tp = place_group(8, 1, 8);
  EXPECT_EQ(tp.ranks_per_node, 8);
  EXPECT_EQ(tp.nodes, 1);
  // dp=12 with stride tp=8: one rank per node, 12 nodes.
  GroupPlacement dp = place_group(12, 8, 8);
  EXPECT_EQ(dp.ranks_per_node, 1);
  EXPECT_EQ(dp.nodes, 12);
  // dp=32 with stride 2: 4 ranks per node over 8 nodes.
  GroupPlacement dp2 = place_group(32, 2, 8);
  EXPECT_EQ(dp2.ranks_per_node, 4);
  EXPECT_EQ(dp2.nodes, 8);
  // A group smaller than a node's share stays on one node.
  GroupPlacement small = place_group(2, 2, 8);
  EXPECT_EQ(small.ranks_per_node, 2);
  EXPECT_EQ(small.nodes, 1);
}

TEST(CollectiveCost, RingAllReduceWithinNode) {
  // 8-rank ring all-reduce of 1 MiB at 100 GB/s: 2·7/8·2^20/1e11 s + 14 steps of 3 µs.
  const GroupPlacement g = place_group(8, 1, 8);
  EXPECT_DOUBLE_EQ(all_reduce_time_s(kMiB, g, kRates), 2 * 7.0 / 8 * kMiB / 100e9 + 14 * 3e-6);
}

TEST(CollectiveCost, ReduceScatterAndAllGatherAreHalfAnAllReduce) {
  const GroupPlacement g = place_group(8, 1, 8);
  EXPECT_DOUBLE_EQ(reduce_scatter_time_s(kMiB, g, kRates), 7.0 / 8 * kMiB / 100e9 + 7 * 3e-6);
  EXPECT_DOUBLE_EQ(all_gather_time_s(kMiB, g, kRates) * 2, all_reduce_time_s(kMiB, g, kRates));
}

TEST(CollectiveCost, AcrossNodesUsesOneNicPerRankOnTheNode) {
  // 16 ranks, 4 per node: rings through 4 NICs at 25 GB/s = 100 GB/s, no faster than NVLink.
  const GroupPlacement g = place_group(16, 2, 8);
  ASSERT_EQ(g.ranks_per_node, 4);
  EXPECT_DOUBLE_EQ(all_reduce_time_s(kMiB, g, kRates),
                   2 * 15.0 / 16 * kMiB / std::min(100e9, 4 * 25e9) + 30 * 6e-6);
  // One rank per node: a single NIC, 25 GB/s.
  const GroupPlacement one = place_group(16, 8, 8);
  EXPECT_DOUBLE_EQ(all_reduce_time_s(kMiB, one, kRates), 2 * 15.0 / 16 * kMiB / 25e9 + 30 * 6e-6);
}

TEST(CollectiveCost, AllToAllSplitsNodeLocalAndRemoteTraffic) {
  // 16 ranks, 8 per node, 1 MiB sent per rank: 7/16 stays on NVLink, 8/16 leaves by the NIC.
  const GroupPlacement g = place_group(16, 1, 8);
  const double within = 7.0 / 16 * kMiB / 100e9;
  const double across = 8.0 / 16 * kMiB / 25e9;
  EXPECT_DOUBLE_EQ(all_to_all_time_s(kMiB, g, kRates), std::max(within, across) + 15 * 6e-6);
}

TEST(CollectiveCost, SingleRankCostsNothing) {
  const GroupPlacement g = place_group(1, 1, 8);
  EXPECT_EQ(all_reduce_time_s(kMiB, g, kRates), 0.0);
  EXPECT_EQ(all_to_all_time_s(kMiB, g, kRates), 0.0);
}

TEST(CollectiveCost, PointToPoint) {
  EXPECT_DOUBLE_EQ(p2p_time_s(kMiB, true, kRates), kMiB / 25e9 + 6e-6);
  EXPECT_DOUBLE_EQ(p2p_time_s(kMiB, false, kRates), kMiB / 100e9 + 3e-6);
}

}  // namespace
}  // namespace sextant::sim
