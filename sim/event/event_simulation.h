// The event-driven engine end to end: build the Plan of a layout, give its
// tasks durations from the cost model, play it, and report what the
// analytical engine reports (SimulationResult) plus the timeline, the
// critical path and per-stage detail.
//
// The step time, its breakdown and the activation memory come from the
// timeline; FLOPs, model-state memory and the optimizer step's duration from
// the analytical model (they do not depend on the schedule). The breakdown is
// that of the stage with the most compute (stage_breakdown.h), the
// counterpart of the analytical model's slowest stage.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/analytic/simulation_result.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/event/event_engine.h"
#include "sim/event/stage_breakdown.h"
#include "sim/event/task_costs.h"
#include "sim/plan/plan.h"
#include "sim/plan/plan_builder.h"

namespace sextant::sim {

/// Slowdown of compute overlapped by communication (EngineOptions), as used
/// by default. Left at 0: the profile's sustained_compute_fraction, fitted end
/// to end on the same development cases (configs/profiles), already absorbs the
/// SMs that overlapped NCCL kernels take, and a second constant for the same
/// effect is not identifiable from step times alone. A sweep of 0 to 0.3 on
/// validation/dev_cases.yaml (the only data it may be fitted on) made the
/// median error worse for every value above 0 (see tests/sim/event).
inline constexpr double kComputeSlowdownUnderComm = 0.0;

struct EventOptions {
  /// Default: the layout's schedule. ZB-H1 is chosen here.
  std::optional<PipelineSchedule> schedule;
  EngineOptions engine{kComputeSlowdownUnderComm, true};
  /// Off for callers that need only the step time (it is the slowest part).
  bool critical_path = true;
};

struct EventSimulation {
  SimulationResult result;
  Plan plan;
  std::vector<TaskCost> costs;
  Timeline timeline;
  std::vector<std::uint32_t> critical_path;  // task ids, first to last; empty when not asked
  int reported_stage = 0;    // the stage with the most compute
  StageBreakdown breakdown;  // its breakdown, which fills result.time
};

/// `layout` must be valid (check_layout) for `model` on layout.total_gpus() GPUs.
/// Throws std::invalid_argument when the chosen schedule cannot run the layout.
EventSimulation simulate_event(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostProfile& profile, const ParallelLayout& layout,
                               const EventOptions& options = {});

}  // namespace sextant::sim
