#include "sim/comm/rank_communicators.h"

#include <array>
#include <set>

namespace sextant::sim {

namespace {

constexpr std::array<ParallelGroup, 9> kKinds = {
    ParallelGroup::kTp,   ParallelGroup::kCp,       ParallelGroup::kEp,       ParallelGroup::kDp,
    ParallelGroup::kPp,   ParallelGroup::kDpCp,     ParallelGroup::kExpertTp, ParallelGroup::kExpertDp,
    ParallelGroup::kEmbedding};
// tp, cp, ep, dp and pp are split for every layout; the kinds after them may share.
constexpr std::size_t kFirstFurther = 5;

// The groups of one kind: `size` ranks `stride` apart, inside a pipeline stage
// or across stages (group_placement.h's group_membership, key ascending).
struct GroupShape {
  bool across_stages = false;
  long long stride = 1;
  long long size = 1;
  bool operator==(const GroupShape& o) const {
    return size == o.size && (size == 1 || (across_stages == o.across_stages && stride == o.stride));
  }
};

GroupShape shape_of(const ParallelLayout& l, ParallelGroup kind) {
  const long long stage_ranks = 1LL * l.tp * l.cp * l.dp;
  switch (kind) {
    case ParallelGroup::kTp: return {false, 1, l.tp};
    case ParallelGroup::kCp: return {false, l.tp, l.cp};
    case ParallelGroup::kEp: return {false, l.etp, l.ep};
    case ParallelGroup::kDp: return {false, 1LL * l.tp * l.cp, l.dp};
    case ParallelGroup::kPp: return {true, stage_ranks, l.pp};
    case ParallelGroup::kDpCp: return {false, l.tp, 1LL * l.cp * l.dp};
    case ParallelGroup::kExpertTp: return {false, 1, l.etp};
    case ParallelGroup::kExpertDp: return {false, 1LL * l.etp * l.ep, l.expert_dp()};
    case ParallelGroup::kEmbedding:
      // The first and the last stage: one rank at pp = 1, the pp group at pp = 2.
      return {true, (l.pp - 1) * stage_ranks, l.pp == 1 ? 1 : 2};
  }
  return {};
}

// The ranks of the pipeline a rank of `stage` sends to or receives from: the
// stages beside it, and under interleaving (vpp > 1) the last stage's chunk
// feeds the first stage's next chunk (Narayanan et al. 2021, Sec. 2.2).
int pipeline_peers(const ParallelLayout& l, int stage) {
  std::set<int> peers;
  if (stage > 0) peers.insert(stage - 1);
  if (stage + 1 < l.pp) peers.insert(stage + 1);
  if (l.vpp > 1 && stage == 0) peers.insert(l.pp - 1);
  if (l.vpp > 1 && stage == l.pp - 1) peers.insert(0);
  peers.erase(stage);
  return static_cast<int>(peers.size());
}

// Neighbours on a ring of n ranks: both sides, one where n = 2.
int ring_neighbours(int n) { return n <= 1 ? 0 : (n == 2 ? 1 : 2); }

}  // namespace

int group_size(const ParallelLayout& l, ParallelGroup kind) { return static_cast<int>(shape_of(l, kind).size); }

ParallelGroup communicator_kind(const ParallelLayout& l, ParallelGroup kind) {
  std::size_t index = 0;
  while (kKinds[index] != kind) ++index;
  if (index < kFirstFurther) return kind;
  const GroupShape mine = shape_of(l, kind);
  for (std::size_t earlier = 0; earlier < index; ++earlier)
    if (shape_of(l, kKinds[earlier]) == mine) return communicator_kind(l, kKinds[earlier]);
  return kind;
}

std::vector<RankCommunicator> rank_communicators(const ParallelLayout& l, int stage, const ModelTraffic& traffic) {
  std::vector<RankCommunicator> out;
  if (l.total_gpus() <= 1) return out;
  out.push_back({"world", static_cast<int>(l.total_gpus()), false, 0});
  const bool embedding_member = stage == 0 || stage == l.pp - 1;
  for (const ParallelGroup kind : kKinds) {
    const int ranks = group_size(l, kind);
    RankCommunicator* own = nullptr;
    if (communicator_kind(l, kind) == kind) {
      // A further kind whose groups hold one rank gets no communicator; nor a
      // middle stage's rank in the embedding group.
      const bool further = kind == ParallelGroup::kDpCp || kind == ParallelGroup::kExpertTp ||
                           kind == ParallelGroup::kExpertDp || kind == ParallelGroup::kEmbedding;
      if ((further && ranks <= 1) || (kind == ParallelGroup::kEmbedding && !embedding_member)) continue;
      out.push_back({to_string(kind), ranks, false, 0});
      own = &out.back();
    } else {
      // Its traffic goes to the communicator it shares.
      const std::string_view shared = to_string(communicator_kind(l, kind));
      for (RankCommunicator& c : out)
        if (c.name == shared) own = &c;
      if (own == nullptr) continue;  // the embedding group of a middle stage
    }
    if (ranks <= 1) continue;  // nothing runs over a group of one rank
    switch (kind) {
      case ParallelGroup::kTp:
        own->collectives = true;
        if (l.tp_comm_overlap) own->p2p_peers += ring_neighbours(ranks);
        break;
      case ParallelGroup::kCp:
        // The all-gather variant gathers K/V and reduce-scatters their
        // gradients; only the ring (p2p) sends to its neighbours. Measured:
        // cp=2 and cp=4 all-gather runs held 0.44 and 0.81 GiB (one and two
        // peers' send/recv buffers) less outside the arena than a ring run's
        // (reports/measurements/2026-11-28-rank-memory-model/README.md, "Long sequences and cp").
        own->collectives = true;
        if (l.cp_comm_type == CpCommType::kP2p) own->p2p_peers += ring_neighbours(ranks);
        break;
      case ParallelGroup::kEp: own->p2p_peers += ranks - 1; break;
      case ParallelGroup::kDp:
      case ParallelGroup::kDpCp: own->collectives = true; break;
      case ParallelGroup::kPp:
        own->collectives = true;
        own->p2p_peers += pipeline_peers(l, stage);
        break;
      case ParallelGroup::kExpertTp:
      case ParallelGroup::kExpertDp: own->collectives = own->collectives || traffic.moe; break;
      case ParallelGroup::kEmbedding:
        own->collectives = own->collectives || (traffic.tied_embeddings && embedding_member);
        break;
    }
  }
  return out;
}

}  // namespace sextant::sim
