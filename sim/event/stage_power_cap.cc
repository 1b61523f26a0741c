#include "sim/event/stage_power_cap.h"

#include "sim/analytic/power_cap.h"

namespace sextant::sim {

std::vector<double> stage_power_cap_slowdowns(const Timeline& burst, double burst_hfu, double cap_hfu) {
  const std::size_t stages = burst.stages.size();
  std::vector<double> slowdowns(stages, 1.0);
  double total_compute_s = 0;
  for (const StageTimeline& s : burst.stages) total_compute_s += s.busy_s[static_cast<std::size_t>(StreamKind::kCompute)];
  if (cap_hfu <= 0 || total_compute_s <= 0) return slowdowns;
  const double mean_compute_s = total_compute_s / static_cast<double>(stages);
  for (std::size_t s = 0; s < stages; ++s) {
    const double share = burst.stages[s].busy_s[static_cast<std::size_t>(StreamKind::kCompute)] / mean_compute_s;
    slowdowns[s] = power_cap_slowdown(burst_hfu * share, cap_hfu);
  }
  return slowdowns;
}

}  // namespace sextant::sim
