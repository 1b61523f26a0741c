#include "sim/comm/group_placement.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace sextant::sim {
namespace {

ParallelLayout layout_of(int tp, int cp, int dp, int pp, int ep = 1, int etp = 1) {
  ParallelLayout l;
  l.tp = tp, l.cp = cp, l.dp = dp, l.pp = pp, l.ep = ep, l.etp = etp;
  return l;
}

// The groups of one kind: members of each color, in key order.
std::vector<std::vector<int>> groups_of(const ParallelLayout& l, ParallelGroup kind) {
  std::map<int, std::map<int, int>> by_color;  // color -> key -> rank
  for (int rank = 0; rank < l.total_gpus(); ++rank) {
    const GroupMembership m = group_membership(rank, l, kind);
    if (!m.member()) continue;  // in no group of this kind
    EXPECT_TRUE(by_color[m.color].emplace(m.key, rank).second) << "two ranks with one key";
  }
  std::vector<std::vector<int>> out;
  for (const auto& [color, members] : by_color) {
    out.emplace_back();
    for (const auto& [key, rank] : members) out.back().push_back(rank);
  }
  return out;
}

TEST(RankCoordinates, TpFastestThenCpDpPp) {
  // tp=2, cp=2, dp=2, pp=2: rank 13 = 1 + 2·(0 + 2·(1 + 2·1)) -> tp 1, cp 0, dp 1, pp 1.
  const RankCoordinates c = rank_coordinates(13, layout_of(2, 2, 2, 2));
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
}

TEST(RankCoordinates, RankAtIsTheInverse) {
  for (const ParallelLayout& l : {layout_of(2, 2, 2, 2), layout_of(4, 2, 1, 3), layout_of(1, 3, 2, 2, 2, 1)})
    for (int rank = 0; rank < l.total_gpus(); ++rank) EXPECT_EQ(rank_at(rank_coordinates(rank, l), l), rank);
  // tp=2, cp=2, dp=2, pp=2: tp 1, cp 0, dp 1, pp 1 is rank 1 + 2·(0 + 2·(1 + 2·1)) = 13.
  EXPECT_EQ(rank_at({.tp = 1, .cp = 0, .dp = 1, .pp = 1}, layout_of(2, 2, 2, 2)), 13);
}

TEST(RankCoordinates, ExpertFoldingInsideTheStage) {
  // tp=2, dp=2, pp=2, ep=2, etp=1: rank 7 is the stage's rank 3 = 0 (etp) + 1·(1 (ep) + 2·1 (edp)).
  const RankCoordinates c = rank_coordinates(7, layout_of(2, 1, 2, 2, 2, 1));
  EXPECT_EQ(c.etp, 0);
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.edp, 1);
  EXPECT_EQ(c.pp, 1);
}

TEST(GroupMembership, GroupsOfEightRanks) {
  // tp=2, dp=2, pp=2 (Megatron-Core's tp-cp-ep-dp-pp order): TP groups are
  // neighbours, DP groups 2 apart, PP groups 4 apart.
  const ParallelLayout l = layout_of(2, 1, 2, 2, 4, 1);
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(groups_of(l, ParallelGroup::kTp), (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(groups_of(l, ParallelGroup::kCp), (G{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(groups_of(l, ParallelGroup::kDp), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groups_of(l, ParallelGroup::kPp), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // ep=4 over the stage's tp·dp = 4 ranks: one expert group per stage.
  EXPECT_EQ(groups_of(l, ParallelGroup::kEp), (G{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(GroupMembership, ContextParallelGroupsHaveStrideTp) {
  // tp=2, cp=2, dp=2: CP groups {0,2},{1,3},{4,6},{5,7}; DP groups stride tp·cp = 4.
  const ParallelLayout l = layout_of(2, 2, 2, 1);
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(groups_of(l, ParallelGroup::kCp), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groups_of(l, ParallelGroup::kDp), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(GroupMembership, DataAndContextParallelTogether) {
  // tp=2, cp=2, dp=2, pp=2: the dp·cp group of a (tp, pp) position holds its
  // 4 ranks, cp fastest: rank = tp + 2·(cp + 2·dp) + 8·pp.
  const ParallelLayout l = layout_of(2, 2, 2, 2);
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(groups_of(l, ParallelGroup::kDpCp), (G{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
}

TEST(GroupMembership, ExpertTensorAndDataParallelFoldTheStage) {
  // tp=2, dp=4, pp=2, ep=2, etp=2 on 16 ranks: a stage's 8 ranks fold as
  // etp (fastest) x ep x edp = 2 x 2 x 2. Stage 0: expert-tp {0,1},{2,3},..;
  // ep pairs 2 apart {0,2},{1,3},{4,6},{5,7}; expert-dp 4 apart {0,4},{1,5},{2,6},{3,7}.
  const ParallelLayout l = layout_of(2, 1, 4, 2, 2, 2);
  using G = std::vector<std::vector<int>>;
  const G etp = groups_of(l, ParallelGroup::kExpertTp), ep = groups_of(l, ParallelGroup::kEp),
          edp = groups_of(l, ParallelGroup::kExpertDp);
  ASSERT_EQ(etp.size(), 8u);
  ASSERT_EQ(ep.size(), 8u);
  ASSERT_EQ(edp.size(), 8u);
  EXPECT_EQ(etp[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(etp[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(ep[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(ep[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(edp[0], (std::vector<int>{0, 4}));
  EXPECT_EQ(edp[3], (std::vector<int>{3, 7}));
  // The second stage's groups are the first's plus 8.
  EXPECT_EQ(edp[4], (std::vector<int>{8, 12}));
}

TEST(GroupMembership, EmbeddingGroupIsTheFirstAndLastStage) {
  // tp=2, pp=4: stages 0 and 3 of each pipeline ({0, 6}, {1, 7}); the middle
  // stages' ranks 2-5 belong to none.
  const ParallelLayout l = layout_of(2, 1, 1, 4);
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(groups_of(l, ParallelGroup::kEmbedding), (G{{0, 6}, {1, 7}}));
  for (int rank = 2; rank < 6; ++rank) EXPECT_FALSE(group_membership(rank, l, ParallelGroup::kEmbedding).member());
  // One stage: each rank is its own group (nothing to sum).
  EXPECT_EQ(groups_of(layout_of(2, 1, 1, 1), ParallelGroup::kEmbedding), (G{{0}, {1}}));
}

}  // namespace
}  // namespace sextant::sim
