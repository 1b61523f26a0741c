#include "sim/analytic/power_cap.h"

#include <algorithm>
#include <cmath>

#include "sim/analytic/analytic_model.h"

namespace sextant::sim {

double power_cap_slowdown(double burst_hfu, double cap_hfu) {
  if (cap_hfu <= 0 || burst_hfu <= cap_hfu) return 1.0;
  return std::cbrt(burst_hfu / cap_hfu);  // P ~ a·f³ held at the cap: f ~ a^(-1/3)
}

std::vector<double> stage_power_cap_slowdowns(std::span<const double> stage_compute_s, double burst_hfu,
                                              double cap_hfu) {
  std::vector<double> slowdowns(stage_compute_s.size(), 1.0);
  double total_s = 0;
  for (const double s : stage_compute_s) total_s += s;
  if (cap_hfu <= 0 || total_s <= 0) return slowdowns;
  const double mean_s = total_s / static_cast<double>(stage_compute_s.size());
  for (std::size_t s = 0; s < stage_compute_s.size(); ++s)
    slowdowns[s] = power_cap_slowdown(burst_hfu * stage_compute_s[s] / mean_s, cap_hfu);
  return slowdowns;
}

bool has_power_cap(const CostProfile& profile) { return power_cap_hfu(profile) > 0; }

double power_cap_hfu(const CostProfile& profile) {
  return profile.fit ? profile.fit->parameter(kFitPowerCapHfu, 0.0) : 0.0;
}

CostProfile without_power_cap(const CostProfile& profile) {
  if (!has_power_cap(profile)) return profile;
  CostProfile burst = profile;
  auto& parameters = burst.fit->parameters;
  parameters.erase(std::remove_if(parameters.begin(), parameters.end(),
                                  [](const auto& p) { return p.first == kFitPowerCapHfu; }),
                   parameters.end());
  return burst;
}

CostProfile with_compute_slowdown(const CostProfile& profile, double slowdown) {
  CostProfile slowed = profile;
  if (!slowed.fit) slowed.fit = ProfileFit{};
  auto& parameters = slowed.fit->parameters;
  const double factor = slowed.fit->parameter(kFitComputeTimeFactor, 1.0) * slowdown;
  bool set = false;
  for (auto& [name, value] : parameters)
    if (name == kFitComputeTimeFactor) value = factor, set = true;
  if (!set) parameters.emplace_back(std::string(kFitComputeTimeFactor), factor);
  return slowed;
}

CostProfile with_power_cap_resolved(const ModelConfig& model, const ClusterConfig& cluster,
                                    const CostProfile& profile, const ParallelLayout& layout) {
  if (!has_power_cap(profile)) return profile;
  const CostProfile burst = without_power_cap(profile);
  const double hfu = simulate_analytic(model, cluster, burst, layout).hfu;
  return with_compute_slowdown(burst, power_cap_slowdown(hfu, power_cap_hfu(profile)));
}

}  // namespace sextant::sim
