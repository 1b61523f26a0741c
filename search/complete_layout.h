// Best completion of a partial layout: the knobs the user left out are chosen
// by searching them (layout_search.h) and keeping the fastest layout that fits.
#pragma once

#include <optional>
#include <vector>

#include "search/layout_search.h"
#include "sim/analytic/simulation_result.h"
#include "sim/core/config_error.h"

namespace sextant::search {

struct Completion {
  std::optional<sim::SimulationResult> best;  // empty when nothing valid fits
  long evaluated = 0;
  long valid = 0;
  long fitting = 0;
  /// When `best` is empty: why (invalid knobs, or the smallest layout's memory).
  std::vector<sim::Diagnostic> reasons;
};

/// The search's top layout for `partial`. With require_memory_fit false the
/// fastest valid layout is returned even when it does not fit.
Completion complete_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                           const sim::CostProfile& profile, long gpus,
                           const sim::PartialLayout& partial,
                           const SearchConstraints& constraints = {},
                           bool require_memory_fit = true);

/// Why a search found nothing: the rules the first candidate (or the given
/// knobs) break, or how much memory the smallest valid layout needs.
std::vector<sim::Diagnostic> explain_empty_search(const sim::ModelConfig& model,
                                                  const sim::ClusterConfig& cluster, long gpus,
                                                  const sim::PartialLayout& partial,
                                                  const SearchResult& result,
                                                  const SearchConstraints& constraints);

}  // namespace sextant::search
