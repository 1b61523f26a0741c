#include "engine/comm/parallel_groups.h"

#include "sim/comm/rank_communicators.h"

#include <algorithm>
#include <map>
#include <vector>
#include <stdexcept>
#include <utility>
#include <string>

namespace sextant::engine::comm {

namespace {

constexpr sim::ParallelGroup kKinds[] = {sim::ParallelGroup::kTp,       sim::ParallelGroup::kCp,
                                         sim::ParallelGroup::kEp,       sim::ParallelGroup::kDp,
                                         sim::ParallelGroup::kPp,       sim::ParallelGroup::kDpCp,
                                         sim::ParallelGroup::kExpertTp, sim::ParallelGroup::kExpertDp,
                                         sim::ParallelGroup::kEmbedding};

}  // namespace

Communicator* ParallelGroups::group(sim::ParallelGroup kind) const {
  switch (static_cast<sim::ParallelGroup>(same_as[static_cast<std::size_t>(kind)])) {
    case sim::ParallelGroup::kTp: return tp.get();
    case sim::ParallelGroup::kCp: return cp.get();
    case sim::ParallelGroup::kEp: return ep.get();
    case sim::ParallelGroup::kDp: return dp.get();
    case sim::ParallelGroup::kPp: return pp.get();
    case sim::ParallelGroup::kDpCp: return dp_cp_own.get();
    case sim::ParallelGroup::kExpertTp: return expert_tp_own.get();
    case sim::ParallelGroup::kExpertDp: return expert_dp_own.get();
    case sim::ParallelGroup::kEmbedding: return embedding_own.get();
  }
  return nullptr;
}

int ParallelGroups::size(sim::ParallelGroup kind) const {
  const Communicator* g = group(kind);
  return g == nullptr ? 1 : g->size();
}

Communicator* ParallelGroups::spanning(sim::ParallelGroup kind) const {
  Communicator* g = group(kind);
  return g != nullptr && g->size() > 1 ? g : nullptr;
}

ParallelGroups make_parallel_groups(Communicator& world, const sim::ParallelLayout& layout, cudaStream_t stream) {
  if (world.size() != layout.total_gpus())
    throw std::invalid_argument("make_parallel_groups: the world has " + std::to_string(world.size()) +
                                " ranks but layout " + layout.to_spec() +
                                " needs tp·cp·dp·pp = " + std::to_string(layout.total_gpus()));
  // Every rank takes part in every split (ncclCommSplit is collective over the
  // world); a rank in no group of a kind passes no color and gets null.
  auto split = [&](sim::ParallelGroup kind) {
    const sim::GroupMembership m = sim::group_membership(world.rank(), layout, kind);
    return world.split(m.member() ? m.color : -1, m.key, std::string(sim::to_string(kind)), stream);
  };
  ParallelGroups groups;
  groups.world_rank = world.rank();
  groups.coordinates = sim::rank_coordinates(world.rank(), layout);
  for (const sim::ParallelGroup kind : kKinds)
    groups.same_as[static_cast<std::size_t>(kind)] = static_cast<int>(kind);
  groups.tp = split(sim::ParallelGroup::kTp);
  groups.cp = split(sim::ParallelGroup::kCp);
  groups.ep = split(sim::ParallelGroup::kEp);
  groups.dp = split(sim::ParallelGroup::kDp);
  groups.pp = split(sim::ParallelGroup::kPp);
  // The further kinds: another kind's communicator where the groups are the
  // same, none where each would hold one rank (every rank decides alike, from
  // the layout, so the splits stay collective).
  std::pair<sim::ParallelGroup, std::unique_ptr<Communicator>*> further[] = {
      {sim::ParallelGroup::kDpCp, &groups.dp_cp_own},
      {sim::ParallelGroup::kExpertTp, &groups.expert_tp_own},
      {sim::ParallelGroup::kExpertDp, &groups.expert_dp_own},
      {sim::ParallelGroup::kEmbedding, &groups.embedding_own}};
  for (auto& [kind, own] : further) {
    const sim::ParallelGroup shares = sim::communicator_kind(layout, kind);
    if (shares != kind) {
      groups.same_as[static_cast<std::size_t>(kind)] = groups.same_as[static_cast<std::size_t>(shares)];
      continue;
    }
    if (sim::group_size(layout, kind) > 1) *own = split(kind);
  }
  return groups;
}

}  // namespace sextant::engine::comm
