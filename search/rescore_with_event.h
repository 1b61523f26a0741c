// Re-scoring of the analytical search's best layouts on the event-driven
// simulator (DESIGN.md: the analytical model scores everything, the event
// simulator the top candidates), then re-ranking by the simulated step time.
#pragma once

#include <vector>

#include "sim/analytic/simulation_result.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"

namespace sextant::search {

/// Replaces each result by its event simulation (same layout), sorts them by
/// ranks_before and keeps the first `top`. fits_memory is kept from the search.
void rescore_with_event(std::vector<sim::SimulationResult>& results,
                        const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                        const sim::CostProfile& profile, int top);

}  // namespace sextant::search
