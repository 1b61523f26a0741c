// The event-driven engine end to end: build the Plan of a layout, give its
// tasks durations from the cost model, play it, and report what the
// analytical engine reports (SimulationResult) plus the timeline, the
// critical path and per-stage detail.
//
// Each stage's tasks are costed at the rates it runs at under the run's
// conditions (sim/compute/stage_rates.h: launch mode, power cap). The step
// time, its breakdown and the activation memory come from the timeline; what
// does not depend on the schedule from the closed forms both engines share:
// FLOPs and what follows from the step time (complete_from_step_time), each
// stage's model-state memory (stage_memory), the optimizer step's duration
// (task_costs.h), and, under a power cap, the step's HFU at the burst clock
// (the analytical model's). The breakdown is that of the stage with the most
// compute (stage_breakdown.h), the counterpart of the analytical model's
// slowest stage.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/analytic/simulation_result.h"
#include "sim/compute/stage_rates.h"
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
/// by default: 0. Fitted on validation/dev_cases.yaml (the only data it may be
/// fitted on), `sextant validate --engine event`, |step-time error| over the
/// 19 cases:
///     slowdown  0     0.02  0.05  0.10  0.20  0.30
///     median    3.0%  3.9%  3.9%  3.9%  4.6%  5.1%
///     worst     8.1%  8.6%  9.6%  11.1% 14.2% 18.7%
/// Every value above 0 is worse: the profiles' sustained_compute_fraction,
/// fitted end to end on the same cases, already absorbs the SMs that
/// overlapped NCCL kernels take, and step times alone cannot tell the two
/// apart. It stays a knob for profiles measured per kernel.
inline constexpr double kComputeSlowdownUnderComm = 0.0;

struct EventOptions {
  /// Default: the layout's schedule. ZB-H1 is chosen here.
  std::optional<PipelineSchedule> schedule;
  EngineOptions engine{kComputeSlowdownUnderComm, true};
  /// Off for callers that need only the step time (it is the slowest part).
  bool critical_path = true;
  /// The run's conditions (stage_rates.h); default the profile's own for the
  /// layout (run_conditions). `run --compare` times tasks with every kernel
  /// launched (task_timing_conditions).
  std::optional<RunConditions> conditions;
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
