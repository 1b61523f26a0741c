#include "sim/compute/power_cap.h"

#include <cmath>

namespace sextant::sim {

double power_cap_slowdown(double burst_hfu, double cap_hfu) {
  if (cap_hfu <= 0 || burst_hfu <= cap_hfu) return 1.0;
  return std::cbrt(burst_hfu / cap_hfu);  // P ~ a·f³ held at the cap: f ~ a^(-1/3)
}

std::vector<double> stage_power_cap_slowdowns(std::span<const double> stage_compute_s, double burst_hfu,
                                              double cap_hfu) {
  // One stage's share is the whole step, whatever its time: the uniform model.
  if (stage_compute_s.size() == 1) return {power_cap_slowdown(burst_hfu, cap_hfu)};
  std::vector<double> slowdowns(stage_compute_s.size(), 1.0);
  double total_s = 0;
  for (const double s : stage_compute_s) total_s += s;
  if (cap_hfu <= 0 || total_s <= 0) return slowdowns;
  const double mean_s = total_s / static_cast<double>(stage_compute_s.size());
  for (std::size_t s = 0; s < stage_compute_s.size(); ++s)
    slowdowns[s] = power_cap_slowdown(burst_hfu * stage_compute_s[s] / mean_s, cap_hfu);
  return slowdowns;
}

}  // namespace sextant::sim
