// The fastest layout whose every mechanism has evidence (mechanism_evidence.h):
// the search's answer "of the published kind", shown beside a pick that rests
// on an ungrounded mechanism (ZeRO-2/3, expert parallelism, ...) so a user sees
// what trusting only validated mechanisms costs, by the model's own numbers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/layout_search.h"

namespace sextant::search {

struct GroundedAlternative {
  /// The fastest grounded layout within the search's constraints; empty when
  /// none is valid and fits, or when `fixed_by_layout` is not empty.
  std::optional<sim::SimulationResult> best;
  /// The ungrounded mechanisms the partial layout itself fixes (zero=3 given in
  /// --layout, say): no grounded completion of it exists.
  std::vector<std::string> fixed_by_layout;
};

/// Searches `partial` with each knob that the search sets itself and whose
/// values the evidence table leaves partly ungrounded (zero in {2, 3}, ep and
/// etp above 1, the MoE overlaps) fixed to each grounded value in turn (zero 0
/// and 1; ep, etp 1; overlaps off) and keeps the fastest result that uses only
/// grounded mechanisms. The passes cover a fraction of the full search's layouts
/// (ZeRO-2/3 and every ep > 1 are left out), so they cost less than it.
GroundedAlternative fastest_grounded_layout(const sim::ModelConfig& model,
                                            const sim::ClusterConfig& cluster,
                                            const sim::CostProfile& profile, long gpus,
                                            const sim::PartialLayout& partial, SearchOptions options);

/// Why `alternative.best` is empty: "--layout fixes zero=3 ... (no dev case, not
/// run by the engine); leave it out to rank layouts with evidence for every
/// mechanism", or that no grounded layout is valid and fits.
std::string no_grounded_layout_reason(const GroundedAlternative& alternative);

/// "a; b": mechanisms (ungrounded_mechanisms' or fixed_by_layout's) in one line.
std::string join_mechanisms(const std::vector<std::string>& mechanisms);

/// How the grounded layout compares with the search's pick, in words.
struct PickComparison {
  std::string how;    // "4.5 % slower", or "as fast" within 0.05 % (the ranking then went by memory)
  std::string loses;  // "it loses on: <step_difference>", or "it ranks below on memory alone: A against B per GPU"
};
PickComparison compare_with_pick(const sim::SimulationResult& grounded, const sim::SimulationResult& pick);

/// Where `slower`'s step time goes beyond `faster`'s, largest first:
/// "pipeline bubble +1.20 s, exposed data-parallel sync +0.40 s; compute -0.08 s"
/// (parts that differ by less than 0.1 % of the step are left out).
std::string step_difference(const sim::SimulationResult& slower, const sim::SimulationResult& faster);

}  // namespace sextant::search
