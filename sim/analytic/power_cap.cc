#include "sim/analytic/power_cap.h"

#include <algorithm>
#include <cmath>

#include "sim/analytic/analytic_model.h"

namespace sextant::sim {

double power_cap_slowdown(double burst_hfu, double cap_hfu) {
  if (cap_hfu <= 0 || burst_hfu <= cap_hfu) return 1.0;
  return std::cbrt(burst_hfu / cap_hfu);  // P ~ a·f³ held at the cap: f ~ a^(-1/3)
}

bool has_power_cap(const CostProfile& profile) {
  return profile.fit && profile.fit->parameter(kFitPowerCapHfu, 0.0) > 0;
}

CostProfile with_power_cap_resolved(const ModelConfig& model, const ClusterConfig& cluster,
                                    const CostProfile& profile, const ParallelLayout& layout) {
  if (!has_power_cap(profile)) return profile;
  CostProfile burst = profile;
  auto& parameters = burst.fit->parameters;
  const double cap_hfu = burst.fit->parameter(kFitPowerCapHfu, 0.0);
  parameters.erase(std::remove_if(parameters.begin(), parameters.end(),
                                  [](const auto& p) { return p.first == kFitPowerCapHfu; }),
                   parameters.end());
  const double hfu = simulate_analytic(model, cluster, burst, layout).hfu;
  const double factor = burst.fit->parameter(kFitComputeTimeFactor, 1.0) * power_cap_slowdown(hfu, cap_hfu);
  bool set = false;
  for (auto& [name, value] : parameters)
    if (name == kFitComputeTimeFactor) value = factor, set = true;
  if (!set) parameters.emplace_back(std::string(kFitComputeTimeFactor), factor);
  return burst;
}

}  // namespace sextant::sim
