// The fit of a profile's few free parameters on measured engine runs
// (`sextant fit-profile` reads the runs and prints the result), by mechanism:
//   compute_time_factor   every kernel's time is multiplied by it: the GPU's
//                         clock under a whole step's sustained load (power
//                         cap) and cache state differ from the isolated
//                         micro-benchmarks `sextant calibrate` timed;
//   step_overhead_s       fixed host work per optimizer step beyond the
//                         profile's measured host_step_s (allocator, Python-free
//                         but still: token shuffling, progress, sync jitter);
//   microbatch_overhead_s per micro-batch work the kernel list does not
//                         name (loss-scale set-up, the task boundaries).
// A prediction is affine in them: for one GPU the step is the sum of its
// tasks, so predicted(a, b, c) = a·S + U + b + c·M, with S the scaled kernel
// time (predicted at a = 1 minus at a = 0), U the unscaled gaps and host time
// (predicted at a = 0) and M the micro-batches per step. The fit solves the
// linear least squares of measured − U on (S, 1, M), each run weighted by
// 1/measured so that relative errors count (the first-order form of least
// squares on ln time), with Eigen's column-pivoting QR. Runs whose micro-batch
// counts are all equal cannot tell c from b: c is then left out (0). An
// overhead fitted negative is held at 0 and the others refitted (the
// active-set step of non-negative least squares).
#pragma once

#include <string>
#include <vector>

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::calibration {

/// One measured engine run: what it trained and its step time.
struct MeasuredStep {
  sim::ModelConfig model;       // the model at the run's sequence length (its dropout is ignored: the engine has none)
  sim::ParallelLayout layout;
  double measured_s = 0;        // the measured step time
};

struct ProfileFitResult {
  sim::ProfileFit fit;              // parameters, log_residual_sd, runs (data_set left to the caller)
  std::vector<double> predicted_s;  // per run, with the fitted parameters
  std::vector<double> measured_s;
};

/// Fits `profile`'s free parameters (any fit it carries is ignored) on `runs`,
/// each predicted with the analytical model on `cluster`. Throws
/// sim::ConfigError (naming --runs) with fewer than 3 runs.
ProfileFitResult fit_profile(const sim::CostProfile& profile, const sim::ClusterConfig& cluster,
                             const std::vector<MeasuredStep>& runs);

/// The power-cap model instead (sim/compute/power_cap.h): one parameter,
/// power_cap_hfu, the HFU at the calibrated burst clock above which the
/// sustained clock falls as HFU^(-1/3); every kernel at the calibrated speed
/// below it (no compute_time_factor, no overheads). Fitted by a search over
/// 0.100, 0.101, ..., 1.500 (and "no cap") for the least sum of squared
/// ln(measured / predicted). Same inputs and errors as fit_profile.
ProfileFitResult fit_power_cap(const sim::CostProfile& profile, const sim::ClusterConfig& cluster,
                               const std::vector<MeasuredStep>& runs);

/// `profile_text` (a profile YAML) with its `fit:` block replaced by `fit`'s.
std::string with_fit_block(const std::string& profile_text, const sim::ProfileFit& fit);

}  // namespace sextant::engine::calibration
