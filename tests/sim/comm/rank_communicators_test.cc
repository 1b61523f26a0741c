#include "sim/comm/rank_communicators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sextant::sim {
namespace {

ParallelLayout layout(int tp, int cp, int dp, int pp, int ep = 1, int etp = 1) {
  ParallelLayout l;
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.pp = pp;
  l.ep = ep;
  l.etp = etp;
  return l;
}

const RankCommunicator* find(const std::vector<RankCommunicator>& all, std::string_view name) {
  for (const RankCommunicator& c : all)
    if (c.name == name) return &c;
  return nullptr;
}

constexpr ParallelGroup kAll[] = {ParallelGroup::kTp,       ParallelGroup::kCp,       ParallelGroup::kEp,
                                  ParallelGroup::kDp,       ParallelGroup::kPp,       ParallelGroup::kDpCp,
                                  ParallelGroup::kExpertTp, ParallelGroup::kExpertDp, ParallelGroup::kEmbedding};

// The engine's rule, restated by enumeration (engine/comm/parallel_groups.cc):
// each rank's (lowest member, place by key) per kind; a further kind shares
// the first earlier kind whose vector is identical.
std::vector<std::pair<int, int>> canonical(const ParallelLayout& l, ParallelGroup kind) {
  std::map<int, std::vector<std::pair<int, int>>> by_color;
  for (int r = 0; r < l.total_gpus(); ++r) {
    const GroupMembership m = group_membership(r, l, kind);
    if (m.member()) by_color[m.color].emplace_back(m.key, r);
  }
  std::vector<std::pair<int, int>> out(static_cast<std::size_t>(l.total_gpus()), {-1, -1});
  for (auto& [color, members] : by_color) {
    std::sort(members.begin(), members.end());
    int lowest = members.front().second;
    for (const auto& [key, rank] : members) lowest = std::min(lowest, rank);
    for (std::size_t place = 0; place < members.size(); ++place)
      out[static_cast<std::size_t>(members[place].second)] = {lowest, static_cast<int>(place)};
  }
  return out;
}

ParallelGroup enumerated_kind(const ParallelLayout& l, ParallelGroup kind) {
  std::size_t index = 0;
  while (kAll[index] != kind) ++index;
  if (index < 5) return kind;
  const auto mine = canonical(l, kind);
  for (std::size_t e = 0; e < index; ++e)
    if (canonical(l, kAll[e]) == mine) return enumerated_kind(l, kAll[e]);
  return kind;
}

// The closed form agrees with the engine's enumeration on every layout of up
// to 16 ranks with tp, cp, dp, pp in {1, 2, 4} and every expert folding.
TEST(CommunicatorKind, ClosedFormMatchesTheEnginesEnumeration) {
  int checked = 0;
  for (int tp : {1, 2, 4})
    for (int cp : {1, 2})
      for (int dp : {1, 2, 4})
        for (int pp : {1, 2, 3, 4})
          for (int ep : {1, 2, 4})
            for (int etp : {1, 2}) {
              const int stage = tp * cp * dp;
              if (stage * pp > 16 || stage % (ep * etp) != 0) continue;
              const ParallelLayout l = layout(tp, cp, dp, pp, ep, etp);
              for (const ParallelGroup kind : kAll) {
                EXPECT_EQ(communicator_kind(l, kind), enumerated_kind(l, kind))
                    << l.to_spec() << " " << to_string(kind);
                ++checked;
              }
            }
  EXPECT_GT(checked, 500);
}

TEST(RankCommunicators, OneGpuHasNone) { EXPECT_TRUE(rank_communicators(layout(1, 1, 1, 1), 0, {}).empty()); }

// dp=2: the world (runs nothing), dp (collectives), and the one-rank tp, cp,
// ep and pp groups the engine splits anyway; dp x cp and expert dp are dp,
// expert tp and the embedding group hold one rank: no communicator.
TEST(RankCommunicators, DataParallelOfTwo) {
  const std::vector<RankCommunicator> c = rank_communicators(layout(1, 1, 2, 1), 0, {true, false});
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].name, "world");
  EXPECT_EQ(c[0].ranks, 2);
  EXPECT_FALSE(c[0].collectives);
  const RankCommunicator* dp = find(c, "dp");
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->ranks, 2);
  EXPECT_TRUE(dp->collectives);
  EXPECT_EQ(dp->p2p_peers, 0);
  for (const char* one : {"tp", "cp", "ep", "pp"}) {
    ASSERT_NE(find(c, one), nullptr) << one;
    EXPECT_EQ(find(c, one)->ranks, 1) << one;
    EXPECT_FALSE(find(c, one)->collectives) << one;
  }
  EXPECT_EQ(find(c, "dp_cp"), nullptr);
  EXPECT_EQ(find(c, "embedding"), nullptr);
}

// pp=4 with tied embeddings: stage 0 talks to stage 1 only and holds the
// embedding group {0, 3}, its own two-rank communicator; a middle stage talks
// to both neighbours and holds no embedding group; interleaved, stage 0 also
// receives from the last stage.
TEST(RankCommunicators, PipelinePeersAndEmbeddingGroup) {
  const ParallelLayout pp4 = layout(1, 1, 1, 4);
  const auto first = rank_communicators(pp4, 0, {true, false});
  ASSERT_NE(find(first, "pp"), nullptr);
  EXPECT_EQ(find(first, "pp")->p2p_peers, 1);
  ASSERT_NE(find(first, "embedding"), nullptr);
  EXPECT_EQ(find(first, "embedding")->ranks, 2);
  EXPECT_TRUE(find(first, "embedding")->collectives);
  const auto middle = rank_communicators(pp4, 1, {true, false});
  EXPECT_EQ(find(middle, "pp")->p2p_peers, 2);
  EXPECT_EQ(find(middle, "embedding"), nullptr);
  ParallelLayout interleaved = pp4;
  interleaved.vpp = 2;
  EXPECT_EQ(find(rank_communicators(interleaved, 0, {true, false}), "pp")->p2p_peers, 2);
  // pp=2: the embedding group is the pp group (shared, not a second communicator).
  const auto pp2 = rank_communicators(layout(1, 1, 1, 2), 0, {true, false});
  EXPECT_EQ(find(pp2, "embedding"), nullptr);
  EXPECT_EQ(pp2.size(), 6u);
  // Untied embeddings: the group is split but never used.
  EXPECT_FALSE(find(rank_communicators(pp4, 0, {false, false}), "embedding")->collectives);
}

// tp=2, dp=2: expert dp spans the stage's four ranks, which no earlier kind
// does: a communicator of its own, used only by a MoE model's expert gradients.
TEST(RankCommunicators, ExpertDataParallelOwnGroupOnlyUsedByMoe) {
  const ParallelLayout l = layout(2, 1, 2, 1);
  const std::vector<RankCommunicator> of_dense = rank_communicators(l, 0, {false, false});
  const RankCommunicator* dense = find(of_dense, "expert_dp");  // into of_dense, which outlives it
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->ranks, 4);
  EXPECT_FALSE(dense->collectives);
  EXPECT_TRUE(find(rank_communicators(l, 0, {false, true}), "expert_dp")->collectives);
}

// tp_comm_overlap sends to the tp ring's neighbours; ep's all-to-all to every other ep rank.
TEST(RankCommunicators, SendRecvPeers) {
  ParallelLayout tp4 = layout(4, 1, 1, 1);
  tp4.sp = true;
  tp4.tp_comm_overlap = true;
  EXPECT_EQ(find(rank_communicators(tp4, 0, {}), "tp")->p2p_peers, 2);
  tp4.tp = 2;
  EXPECT_EQ(find(rank_communicators(tp4, 0, {}), "tp")->p2p_peers, 1);
  const ParallelLayout ep8 = layout(1, 1, 8, 1, 8, 1);
  EXPECT_EQ(find(rank_communicators(ep8, 0, {false, true}), "ep")->p2p_peers, 7);
}

}  // namespace
}  // namespace sextant::sim
