// The discrete-event engine: plays a Plan on one representative rank per
// pipeline stage and records when every task ran.
//
// Model. Each rank has the Plan's streams; a stream runs one task at a time,
// in the Plan's order, and a task starts when its stream is free and its
// dependencies are done. A task has work (its duration alone on an idle GPU)
// done at a rate that changes while it runs:
//  - a compute task runs at 1/(1 + compute_slowdown_under_comm) while any
//    communication task of its rank runs (NCCL kernels take SMs and memory
//    bandwidth from the GEMMs they overlap; Rashidi et al. 2021, "Enabling
//    compute-communication overlap in distributed deep learning training
//    platforms", measure the effect; sim/event/event_simulation.h gives the value);
//  - communication tasks on the same link of the same rank (the NIC for
//    inter-node groups, NVLink inside a node) share its bandwidth equally,
//    e.g. a DP reduce-scatter and a pipeline send that both leave the node.
// The engine keeps an event queue of task ends; when the set of running tasks
// of a rank changes, the rates of its running tasks are recomputed and their
// ends rescheduled (a fluid model of bandwidth and SM sharing).
//
// Why one rank per stage is enough. Every rank of a stage's TP, CP, EP and DP
// groups runs the same task list with the same durations: layers are sharded
// evenly, every rank holds the same number of tokens, and a collective ends at
// the same time on all members. The stage's ranks therefore share one
// timeline, and a pipeline send between representatives stands for the tp·cp
// parallel sends between the stages. This stops being true when ranks of a
// stage do different work: MoE routing that sends more tokens to some experts
// (the all-to-all and the expert GEMMs wait for the most loaded rank; the
// cost model assumes balanced routing, so the simulated step is a lower bound),
// stragglers and clock differences, and network placements in which some DP
// rings cross more switches than others.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/event/task_costs.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

struct EngineOptions {
  /// A compute task overlapped by communication on its rank takes (1 + this)
  /// times as long. 0 turns interference off.
  double compute_slowdown_under_comm = 0;
  /// Communication tasks on one link of one rank share its bandwidth.
  bool share_links = true;
};

struct StageTimeline {
  std::array<double, kStreamKinds> busy_s{};  // time each stream was running a task
  double peak_activation_bytes = 0;           // highest activation memory over the step
  double end_s = 0;                           // when the stage's last task ended
};

struct Timeline {
  std::vector<double> start_s;  // per task
  std::vector<double> end_s;
  std::vector<StageTimeline> stages;
  double step_time_s = 0;  // when the last task of any stage ended
};

/// Plays `plan` with one cost per task. Throws std::logic_error when some
/// task can never start (the plan deadlocks), naming it.
Timeline play(const Plan& plan, std::span<const TaskCost> costs, const EngineOptions& options);

}  // namespace sextant::sim
