#include "engine/comm/parallel_groups.h"

#include <stdexcept>
#include <string>

namespace sextant::engine::comm {

Communicator* ParallelGroups::group(sim::ParallelGroup kind) const {
  switch (kind) {
    case sim::ParallelGroup::kTp: return tp.get();
    case sim::ParallelGroup::kCp: return cp.get();
    case sim::ParallelGroup::kDp: return dp.get();
    case sim::ParallelGroup::kDpCp: return dp_cp.get();
    case sim::ParallelGroup::kEp: return ep.get();
    case sim::ParallelGroup::kExpertTp: return expert_tp.get();
    case sim::ParallelGroup::kExpertDp: return expert_dp.get();
    case sim::ParallelGroup::kPp: return pp.get();
    case sim::ParallelGroup::kEmbedding: return embedding.get();
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
  groups.tp = split(sim::ParallelGroup::kTp);
  groups.cp = split(sim::ParallelGroup::kCp);
  groups.ep = split(sim::ParallelGroup::kEp);
  groups.dp = split(sim::ParallelGroup::kDp);
  groups.pp = split(sim::ParallelGroup::kPp);
  groups.dp_cp = split(sim::ParallelGroup::kDpCp);
  groups.expert_tp = split(sim::ParallelGroup::kExpertTp);
  groups.expert_dp = split(sim::ParallelGroup::kExpertDp);
  groups.embedding = split(sim::ParallelGroup::kEmbedding);
  return groups;
}

}  // namespace sextant::engine::comm
