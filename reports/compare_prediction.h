// `sextant run --compare`'s prediction: the event simulator's step and, per
// Plan task kind ("layer*.attn.fwd", "optimizer.step", ...), each kind's time
// per step for the model, layout and profile the engine ran, to set beside
// the engine's measurement (compare_report.h).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::reports {

/// The simulator's side: the event engine's step time (kernels in the step's
/// CUDA graph) and each task kind's summed duration over one step (stage 0,
/// the only stage on one GPU) with kernels launched one by one, as the engine
/// runs them when it times tasks.
struct ComparePrediction {
  double step_time_s = 0;
  std::optional<std::pair<double, double>> step_time_interval_s;  // with a fitted profile
  std::map<std::string, double> task_seconds_per_step;
  /// Per pipeline stage, its forward, backward and recomputation tasks' time
  /// per step (no communication, no optimizer: the engine's optimizer task
  /// also waits for the other stages), kernels launched one by one; and the
  /// task kinds they are, to sum a stage's measured tasks the same way.
  std::vector<double> stage_compute_s;
  std::set<std::string> compute_kinds;
};

/// A stage's measured compute: its measured task kinds among
/// `predicted.compute_kinds`, summed.
double measured_compute_s(const ComparePrediction& predicted, const std::map<std::string, double>& measured);
ComparePrediction predict_for_compare(const sim::ModelConfig& model,
                                      const sim::ClusterConfig& cluster,
                                      const sim::CostProfile& profile,
                                      const sim::ParallelLayout& layout);

}  // namespace sextant::reports
