// The event-driven simulator's share of a search (DESIGN.md: the analytical
// model scores every layout, the event simulator the top candidates): the one
// place that replays the analytical search's best layouts on the event engine,
// for `search --engine event`, `simulate --engine event` and `validate --engine
// event` alike.
#pragma once

#include <optional>
#include <vector>

#include "search/search_constraints.h"
#include "sim/analytic/simulation_result.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/event/event_simulation.h"

namespace sextant::search {

/// How many of the analytical search's best layouts the event engine replays.
inline constexpr int kEventCandidates = 8;

/// Replaces each result by its event simulation (same layout), sorts them by
/// ranks_before and keeps the first `top`. fits_memory is kept from the search.
void rescore_with_event(std::vector<sim::SimulationResult>& results,
                        const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                        const sim::CostProfile& profile, int top);

/// The event engine's completion of `partial`: the analytical search's best
/// `candidates` layouts that fit, each played on the event engine, re-ranked as
/// rescore_with_event ranks them; the first. Empty when the search finds nothing.
std::optional<sim::EventSimulation> complete_with_event(
    const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
    const sim::CostProfile& profile, long gpus, const sim::PartialLayout& partial,
    const SearchConstraints& constraints, int candidates = kEventCandidates,
    const sim::EventOptions& options = {});

}  // namespace sextant::search
