// The table a multi-GPU run prints at start: for every rank its host, its GPU
// and its coordinates in the layout (tp, cp, ep, dp, pp), placed in the rank
// order tp-cp-ep-dp-pp (sim/comm/group_placement.h, the simulator's).
#pragma once

#include <string>
#include <vector>

#include "sim/core/parallel_layout.h"

namespace sextant::engine::launch {

struct RankPlacement {
  std::string host;
  int gpu = 0;  // CUDA device index on the host
};

/// What one rank tells the others at the rendezvous ("host gpu"), and back.
std::string placement_line(const RankPlacement& placement);
RankPlacement parse_placement_line(const std::string& line);

/// One row per rank: "rank host gpu tp cp ep dp pp", aligned.
std::string rank_map_table(const std::vector<RankPlacement>& ranks, const sim::ParallelLayout& layout);

}  // namespace sextant::engine::launch
