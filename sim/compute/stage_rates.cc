#include "sim/compute/stage_rates.h"

#include <stdexcept>
#include <string>

#include "sim/compute/power_cap.h"

namespace sextant::sim {

RunConditions run_conditions(const CostProfile& profile, const ModelConfig& model, const ParallelLayout& layout) {
  RunConditions c;
  c.launch_mode = engine_launch_mode(profile, model, layout);
  if (profile.fit) c.power_cap_hfu = profile.fit->parameter(kFitPowerCapHfu, 0.0);
  return c;
}

RunConditions task_timing_conditions(const CostProfile& profile, const ModelConfig& model, const ParallelLayout& layout) {
  RunConditions c = run_conditions(profile, model, layout);
  c.launch_mode = kTaskTimingLaunchMode;
  return c;
}

DeviceRates StageRates::stage(int stage) const {
  DeviceRates r = burst;
  r.compute_time_factor *= clock_slowdown(stage);
  return r;
}

StageRates stage_rates(const GpuConfig& gpu, const CostProfile& profile, const ParallelLayout& layout,
                       const RunConditions& conditions, const BurstClockLoad& load) {
  StageRates out;
  out.burst = device_rates(gpu, profile, layout.precision, conditions.launch_mode);
  if (!conditions.power_capped()) return out;
  if (load.stage_compute_s.size() != static_cast<std::size_t>(layout.pp))
    throw std::invalid_argument("stage_rates: a power cap needs the compute of each of the " +
                                std::to_string(layout.pp) + " pipeline stages at the burst clock; got " +
                                std::to_string(load.stage_compute_s.size()));
  out.clock_slowdowns = stage_power_cap_slowdowns(load.stage_compute_s, load.hfu, conditions.power_cap_hfu);
  return out;
}

}  // namespace sextant::sim
