// Search of every valid layout: enumerate, prune by memory, score with the
// analytical model, rank by step time (ties: less memory, then the layout's
// knobs, so the order never depends on threads). Each (pp, vpp) is enumerated
// with one pipeline split (split_options.h's default, or the user's); when the
// user gave no split knob, every other split of the 16 best is tried after.
//
// Thread-safety: search_layouts runs its own worker threads over the outer grid
// (candidate_space.h); each keeps its own best list, merged at the end.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "search/search_constraints.h"
#include "sim/analytic/simulation_result.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::search {

struct SearchOptions {
  SearchConstraints constraints;
  int top = 5;             // how many of the best to keep
  bool keep_all = false;   // keep every valid result, fitting or not (for CSV)
  bool require_memory_fit = true;  // false: rank layouts that do not fit too
  int threads = 0;         // 0: all hardware threads
  /// Skip timing a layout whose step without its data-parallel sync already
  /// ranks it after the best list (layout_search.cc); the same best list
  /// either way. Off: every fitting layout is timed (the reference in tests).
  bool prune_by_bound = true;
  /// Called from the calling thread about every 100 ms with the fraction done.
  std::function<void(double fraction_done)> progress;
};

struct SearchResult {
  std::vector<sim::SimulationResult> best;  // best first, at most `top`
  std::vector<sim::SimulationResult> all;   // every valid one, best first, if keep_all
  long evaluated = 0;  // complete layouts considered
  long valid = 0;      // of those, valid for the model and GPU count
  long feasible = 0;   // of those, fitting in memory
  long bounded = 0;    // of those, not timed: their bound ranked them out (prune_by_bound)
  double search_time_s = 0;
  double memory_limit_bytes = 0;  // what "fits" meant
  /// For explanations when nothing fits or nothing is valid.
  std::optional<sim::ParallelLayout> first_invalid;
  std::optional<sim::ParallelLayout> smallest_unfit;
  double smallest_unfit_bytes = 0;
};

SearchResult search_layouts(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                            const sim::CostProfile& profile, long gpus,
                            const sim::PartialLayout& partial, const SearchOptions& options);

/// Total order used for ranking: step time, then memory, then the knobs.
bool ranks_before(const sim::SimulationResult& a, const sim::SimulationResult& b);

}  // namespace sextant::search
