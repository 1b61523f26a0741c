// The communicators of one rank's parallel groups — tp, cp, ep, dp, pp — split
// from the world in the rank order tp-cp-ep-dp-pp, the placement the simulator
// costs (sim/comm/group_placement.h: rank_coordinates, group_membership).
//
// Works with any Communicator: NCCL in a real run, in-process in tests. Every
// rank of the world calls make_parallel_groups with the same layout.
#pragma once

#include <memory>

#include "engine/comm/communicator.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::comm {

struct ParallelGroups {
  std::unique_ptr<Communicator> tp;  // tp consecutive ranks
  std::unique_ptr<Communicator> cp;  // stride tp
  std::unique_ptr<Communicator> ep;  // expert parallel: stride etp inside the stage
  std::unique_ptr<Communicator> dp;  // stride tp·cp
  std::unique_ptr<Communicator> pp;  // stride tp·cp·dp
};

/// Splits `world` (layout.total_gpus() ranks) into this rank's five groups,
/// each bound to `stream`. Throws std::invalid_argument when the world's size
/// is not the layout's GPU count.
ParallelGroups make_parallel_groups(Communicator& world, const sim::ParallelLayout& layout,
                                    cudaStream_t stream);

}  // namespace sextant::engine::comm
