// The one set of communicators of a rank: every parallel group it belongs to,
// split once from the world in the rank order tp-cp-ep-dp-pp, the placement
// the simulator costs (sim/comm/group_placement.h: rank_coordinates and
// group_membership are the one home of that order). Everything in the engine
// that communicates takes its groups from here.
//
// Works with any Communicator: NCCL in a real run, in-process in tests. Every
// rank of the world calls make_parallel_groups with the same layout. A
// default-constructed ParallelGroups is one GPU: no group at all.
#pragma once

#include <memory>

#include "engine/comm/communicator.h"
#include "sim/comm/group_placement.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::comm {

struct ParallelGroups {
  std::unique_ptr<Communicator> tp;          // tp consecutive ranks
  std::unique_ptr<Communicator> cp;          // stride tp
  std::unique_ptr<Communicator> dp;          // stride tp·cp
  std::unique_ptr<Communicator> dp_cp;       // dp and cp together: dense gradients' reduction when cp > 1
  std::unique_ptr<Communicator> ep;          // expert parallel: stride etp inside the stage
  std::unique_ptr<Communicator> expert_tp;   // etp consecutive ranks
  std::unique_ptr<Communicator> expert_dp;   // expert parameters' reduction: stride etp·ep inside the stage
  std::unique_ptr<Communicator> pp;          // stride tp·cp·dp
  /// Pipeline ranks 0 and pp − 1 of the rank's pipeline (a tied embedding's
  /// two copies); null on the stages between them.
  std::unique_ptr<Communicator> embedding;
  /// The rank's coordinates in every dimension (world rank 0's when default-constructed).
  sim::RankCoordinates coordinates;
  int world_rank = 0;

  /// The group of `kind` (null where the rank is in none); its size is 1 where
  /// the layout has no such parallelism.
  Communicator* group(sim::ParallelGroup kind) const;
  /// Ranks in the group of `kind` (1 when there is none).
  int size(sim::ParallelGroup kind) const;
  /// The group of `kind` when it has more than one rank, else null: what the
  /// trainer communicates over (a group of one is no communication).
  Communicator* spanning(sim::ParallelGroup kind) const;
};

/// Splits `world` (layout.total_gpus() ranks) into this rank's groups, each
/// bound to `stream`. Throws std::invalid_argument when the world's size is
/// not the layout's GPU count.
ParallelGroups make_parallel_groups(Communicator& world, const sim::ParallelLayout& layout, cudaStream_t stream);

}  // namespace sextant::engine::comm
