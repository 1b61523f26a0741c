// The space of complete layouts a search enumerates.
//
// Outer grid: (tp, cp, pp, dp) with tp·cp·pp·dp = GPUs; tp and cp powers of two
// dividing the heads (and the sequence), pp up to the layer count. Inner knobs per
// grid point: vpp from vpp_options (split_options.h) with the default split
// for (pp, vpp) or the user's, micro-batch dividing the batch
// per replica (up to 16), ep dividing the experts and etp in {1, tp} for MoE,
// sp, recompute, ZeRO stage (2 and 3 only with pp = 1), schedule, and the three
// overlaps. Knobs fixed in the partial layout take only their given value.
// Candidates that break a rule are still produced (the caller counts them);
// layout_check decides.
#pragma once

#include <functional>
#include <vector>

#include "search/search_constraints.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::search {

struct GridPoint {
  int tp = 1, cp = 1, pp = 1, dp = 1;
};

/// The outer grid, in a fixed order (tp, then cp, then pp ascending).
std::vector<GridPoint> grid_points(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                                   long gpus, const sim::PartialLayout& partial,
                                   const SearchConstraints& constraints);

/// Calls `visit` with every complete layout at `point`, in a fixed order, one
/// ParallelLayout reused between calls (copy what you keep). Layouts that
/// differ only in zero, overlap_grad_reduce and overlap_param_gather come one
/// after another, and runs of those that differ only in recompute too.
void for_each_layout_at(const sim::ModelConfig& model, const sim::PartialLayout& partial,
                        const GridPoint& point, const SearchConstraints& constraints,
                        const std::function<void(const sim::ParallelLayout&)>& visit);

}  // namespace sextant::search
