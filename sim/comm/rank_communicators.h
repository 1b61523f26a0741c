// The NCCL communicators one rank of a layout holds, and what the training
// step runs over each: what NCCL allocates device memory for
// (sim/memory/runtime_memory.h prices it).
//
// The set is the engine's (engine/comm/world_setup.cc; parallel_groups.cc
// takes its sharing rule, communicator_kind, from here):
// the world communicator, then tp, cp, ep, dp and pp split from it for every
// layout (a group of one rank is a one-rank communicator), then dp x cp,
// expert tp, expert dp and the embedding group, each sharing the communicator
// of the first kind before it with the same groups, none where each group
// would hold one rank. A one-GPU layout has no communicator at all.
//
// What runs over each is what the engine queues (engine/trainer*.cc,
// data_parallel/, tensor_parallel/, training/stop_vote.cc), extended by
// mechanism to what the engine does not run yet (cp, ep, MoE expert groups):
// collectives (all-reduce, reduce-scatter, all-gather) over every spanning tp,
// cp, dp and pp group, dp x cp, the expert groups of a MoE model and a tied
// embedding's group; send/recv with the neighbouring pipeline stages (and,
// interleaved, between the last and the first), with the tp ring's neighbours
// under tp_comm_overlap, with the cp ring's neighbours (K/V) and with every
// other rank of the ep group (all-to-all). The world runs nothing.
#pragma once

#include <string_view>
#include <vector>

#include "sim/comm/group_placement.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// One communicator of a rank, named by the first kind that uses it.
struct RankCommunicator {
  std::string_view name;     // "world", "tp", "dp", ...
  int ranks = 1;
  bool collectives = false;  // runs all-reduce / reduce-scatter / all-gather
  int p2p_peers = 0;         // distinct ranks it sends to or receives from
};

/// What of the model changes which groups carry traffic.
struct ModelTraffic {
  bool tied_embeddings = false;  // the first and last stage all-reduce the embedding's gradient
  bool moe = false;              // expert tp and expert dp groups reduce expert gradients
};

/// The kind whose communicator the groups of `kind` use (itself where it has
/// its own; tp, cp, ep, dp and pp always do), by the engine's rule: a further
/// kind shares the first kind before it (in the order tp, cp, ep, dp, pp,
/// dp x cp, expert tp, expert dp, embedding) whose groups are the same ranks
/// in the same order. Closed form: inside a pipeline stage every kind's group
/// is an arithmetic run of in-stage ranks (stride, size) in the rank order
/// tp-cp-dp or, for the expert kinds, etp-ep-edp (group_placement.h), so two
/// kinds have the same groups exactly when stride and size agree or both
/// groups hold one rank.
ParallelGroup communicator_kind(const ParallelLayout& layout, ParallelGroup kind);

/// Ranks in each group of `kind` (the embedding group: 2 from pp = 2 on, else 1).
int group_size(const ParallelLayout& layout, ParallelGroup kind);

/// The communicators a rank of pipeline stage `stage` holds (0 <= stage < pp),
/// the world first; empty when the layout has one GPU.
std::vector<RankCommunicator> rank_communicators(const ParallelLayout& layout, int stage,
                                                 const ModelTraffic& traffic);

}  // namespace sextant::sim
