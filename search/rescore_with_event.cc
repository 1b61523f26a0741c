#include "search/rescore_with_event.h"

#include <algorithm>

#include "search/layout_search.h"

namespace sextant::search {

void rescore_with_event(std::vector<sim::SimulationResult>& results, const sim::ModelConfig& model,
                        const sim::ClusterConfig& cluster, const sim::CostProfile& profile,
                        int top) {
  sim::EventOptions options;
  options.critical_path = false;  // only the step time is needed
  for (sim::SimulationResult& r : results) {
    const bool fits = r.fits_memory;
    r = sim::simulate_event(model, cluster, profile, r.layout, options).result;
    r.fits_memory = fits;
  }
  std::sort(results.begin(), results.end(), ranks_before);
  if (static_cast<int>(results.size()) > top) results.resize(top);
}

std::optional<sim::EventSimulation> complete_with_event(
    const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
    const sim::CostProfile& profile, long gpus, const sim::PartialLayout& partial,
    const SearchConstraints& constraints, int candidates, const sim::EventOptions& options) {
  SearchOptions search;
  search.constraints = constraints;
  search.top = candidates;
  search.threads = 1;
  std::optional<sim::EventSimulation> best;
  for (const sim::SimulationResult& candidate :
       search_layouts(model, cluster, profile, gpus, partial, search).best) {
    sim::EventSimulation e = sim::simulate_event(model, cluster, profile, candidate.layout, options);
    e.result.fits_memory = candidate.fits_memory;  // as rescore_with_event keeps it
    if (!best || ranks_before(e.result, best->result)) best = std::move(e);
  }
  return best;
}

}  // namespace sextant::search
