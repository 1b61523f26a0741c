#include "search/rescore_with_event.h"

#include <algorithm>

#include "search/layout_search.h"
#include "sim/event/event_simulation.h"

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

}  // namespace sextant::search
