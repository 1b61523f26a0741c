// The simulator's run conditions in one step: a profile (what the kernels
// reach, as `sextant calibrate` timed them or a datasheet fit says) and the
// conditions of one run — how the engine launches its kernels (launch_mode.h)
// and the power cap that lowers each pipeline stage's clock (power_cap.h) —
// give the rates each stage runs at. Both engines read these rates; neither
// edits the profile.
//
// The framework (sim/core/framework.h) is not among these conditions: it is
// the software the profile describes, combined with it once where the input is
// read (with_framework), and the same for every stage and every layout.
//
// The power cap needs a first play of the step at the calibrated (burst)
// clock: the step's HFU there (the analytic model's, as the profile's
// power_cap_hfu was fitted with it) and each stage's compute there, which each
// engine takes from its own play (BurstClockLoad).
#pragma once

#include <vector>

#include "sim/compute/device_rates.h"
#include "sim/compute/launch_mode.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// What a run does differently from the conditions the profile was measured in.
struct RunConditions {
  LaunchMode launch_mode = LaunchMode::kGraphReplay;
  /// The HFU at the burst clock at which a GPU reaches its power cap
  /// (power_cap.h); 0: no cap, every stage at the burst clock.
  double power_cap_hfu = 0;

  bool power_capped() const { return power_cap_hfu > 0; }
  /// The same run at the burst clock: the first play a power cap needs.
  RunConditions at_burst_clock() const {
    RunConditions burst = *this;
    burst.power_cap_hfu = 0;
    return burst;
  }
};

/// The conditions our engine runs `layout` under where `profile` describes
/// it: its launch mode (engine_launch_mode) and the fit's power_cap_hfu (none
/// without a fit or where the fit has none).
RunConditions run_conditions(const CostProfile& profile, const ModelConfig& model, const ParallelLayout& layout);

/// The same with the engine timing its tasks (kTaskTimingLaunchMode), as
/// `run --compare` measures them.
RunConditions task_timing_conditions(const CostProfile& profile, const ModelConfig& model,
                                     const ParallelLayout& layout);

/// The step played at the burst clock, which sets each stage's clock under a
/// power cap (stage_power_cap_slowdowns).
struct BurstClockLoad {
  std::vector<double> stage_compute_s;  // each pipeline stage's compute, any one unit for all
  double hfu = 0;                       // the step's HFU, from the analytic model
};

/// The rates of each pipeline stage's GPUs. Invariant: clock_slowdowns is
/// empty (every stage at the burst clock) or holds one entry per stage.
struct StageRates {
  /// Every stage at the burst clock, its kernels launched as the run launches them.
  DeviceRates burst;
  /// f_burst / f of each stage under the power cap (power_cap.h); empty
  /// without a cap (no allocation on the search's path).
  std::vector<double> clock_slowdowns;

  /// Stage `stage`'s f_burst / f: 1 at the burst clock.
  double clock_slowdown(int stage) const {
    return clock_slowdowns.empty() ? 1.0 : clock_slowdowns[static_cast<std::size_t>(stage)];
  }
  /// Stage `stage`'s rates: `burst` with every kernel clock_slowdown(stage)
  /// times as long (its compute_time_factor multiplied).
  DeviceRates stage(int stage) const;
};

/// The one step: `profile` on `gpu` for `layout` (its precision and pp
/// stages) under `conditions`. Under a power cap `load` is the step at the
/// burst clock (at_burst_clock()'s rates) and must hold layout.pp stages'
/// compute (throws std::invalid_argument otherwise); without one it is not read.
StageRates stage_rates(const GpuConfig& gpu, const CostProfile& profile, const ParallelLayout& layout,
                       const RunConditions& conditions, const BurstClockLoad& load = {});

}  // namespace sextant::sim
