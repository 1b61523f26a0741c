#include "engine/comm/parallel_groups.h"

#include <stdexcept>
#include <string>

#include "sim/comm/group_placement.h"

namespace sextant::engine::comm {

ParallelGroups make_parallel_groups(Communicator& world, const sim::ParallelLayout& layout,
                                    cudaStream_t stream) {
  if (world.size() != layout.total_gpus())
    throw std::invalid_argument("make_parallel_groups: the world has " +
                                std::to_string(world.size()) + " ranks but layout " +
                                layout.to_spec() + " needs tp·cp·dp·pp = " +
                                std::to_string(layout.total_gpus()));
  auto split = [&](sim::ParallelGroup kind) {
    const sim::GroupMembership m = sim::group_membership(world.rank(), layout, kind);
    return world.split(m.color, m.key, std::string(sim::to_string(kind)), stream);
  };
  ParallelGroups groups;
  groups.tp = split(sim::ParallelGroup::kTp);
  groups.cp = split(sim::ParallelGroup::kCp);
  groups.ep = split(sim::ParallelGroup::kEp);
  groups.dp = split(sim::ParallelGroup::kDp);
  groups.pp = split(sim::ParallelGroup::kPp);
  return groups;
}

}  // namespace sextant::engine::comm
