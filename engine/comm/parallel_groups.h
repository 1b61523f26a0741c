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

#include <array>
#include <memory>

#include "engine/comm/communicator.h"
#include "sim/comm/group_placement.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::comm {

struct ParallelGroups {
  // Split for every layout (one rank each where the layout has no such parallelism).
  std::unique_ptr<Communicator> tp;  // tp consecutive ranks
  std::unique_ptr<Communicator> cp;  // stride tp
  std::unique_ptr<Communicator> ep;  // expert parallel: stride etp inside the stage
  std::unique_ptr<Communicator> dp;  // stride tp·cp
  std::unique_ptr<Communicator> pp;  // stride tp·cp·dp
  /// The rank's coordinates in every dimension (world rank 0's when default-constructed).
  sim::RankCoordinates coordinates;
  int world_rank = 0;

  /// The group of `kind`: dp x cp, expert-tp, expert-dp and the embedding group
  /// too. Null where the rank is in no group of that kind or the group would
  /// have one rank; a kind whose groups are those of another kind shares that
  /// communicator (dp x cp is dp at cp = 1), so no rank holds two NCCL
  /// communicators of the same members (each costs device memory).
  Communicator* group(sim::ParallelGroup kind) const;
  /// Ranks in the group of `kind` (1 when there is none).
  int size(sim::ParallelGroup kind) const;
  /// The group of `kind` when it has more than one rank, else null: what the
  /// trainer communicates over (a group of one is no communication).
  Communicator* spanning(sim::ParallelGroup kind) const;

  // Set by make_parallel_groups: the further kinds' own communicators (null
  // where they share one above or have one rank), and which kind each shares.
  std::unique_ptr<Communicator> dp_cp_own, expert_tp_own, expert_dp_own, embedding_own;
  std::array<int, 9> same_as{};  // by kind: the kind whose communicator it uses (itself: its own)
};

/// Splits `world` (layout.total_gpus() ranks) into this rank's groups, each
/// bound to `stream`. Throws std::invalid_argument when the world's size is
/// not the layout's GPU count.
ParallelGroups make_parallel_groups(Communicator& world, const sim::ParallelLayout& layout, cudaStream_t stream);

}  // namespace sextant::engine::comm
