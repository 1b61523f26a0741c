#include "sim/event/event_simulation.h"

#include <algorithm>

#include "sim/analytic/analytic_model.h"
#include "sim/event/critical_path.h"
#include "sim/memory/engine_arena.h"
#include "sim/memory/memory_model.h"

namespace sextant::sim {

namespace {

// The rates each stage runs at (stage_rates.h). Under a power cap a stage's
// clock follows its share of the step's compute at the burst clock, which
// this engine takes from its own play of the step at that clock (each
// stage's compute stream busy, the optimizer step included), and the step's
// HFU there from the analytic model, as the profile's cap was fitted.
StageRates event_stage_rates(const Plan& plan, const ModelConfig& model, const ClusterConfig& cluster,
                             const CostProfile& profile, const ParallelLayout& layout,
                             const RunConditions& conditions, const EngineOptions& engine) {
  const StageRates at_burst = stage_rates(cluster.gpu, profile, layout, conditions.at_burst_clock());
  if (!conditions.power_capped()) return at_burst;
  BurstClockLoad load;
  load.hfu = simulate_analytic(model, cluster, profile, layout, conditions.at_burst_clock()).hfu;
  if (plan.num_stages() == 1) {
    load.stage_compute_s = {1.0};  // one stage's share is the whole step (stage_power_cap_slowdowns)
  } else {
    const Timeline timeline = play(plan, task_costs(plan, model, cluster, profile, layout, at_burst), engine);
    for (const StageTimeline& s : timeline.stages)
      load.stage_compute_s.push_back(s.busy_s[static_cast<std::size_t>(StreamKind::kCompute)]);
  }
  return stage_rates(cluster.gpu, profile, layout, conditions, load);
}

}  // namespace

EventSimulation simulate_event(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostProfile& profile, const ParallelLayout& layout,
                               const EventOptions& options) {
  const RunConditions conditions = options.conditions.value_or(run_conditions(profile, model, layout));
  EventSimulation out;
  PlanOptions plan_options;
  plan_options.schedule = options.schedule;
  plan_options.pipeline_exchange = profile.behaviour.pipeline_exchange;
  out.plan = build_plan(model, layout, plan_options);
  const StageRates rates = event_stage_rates(out.plan, model, cluster, profile, layout, conditions, options.engine);
  out.costs = task_costs(out.plan, model, cluster, profile, layout, rates);
  out.timeline = play(out.plan, out.costs, options.engine);
  if (options.critical_path) out.critical_path = critical_path(out.plan, out.timeline);

  // The stage with the most compute (its stream's busy time) stands for the step.
  const int stages = out.plan.num_stages();
  auto compute_busy = [&](int s) {
    return out.timeline.stages[static_cast<std::size_t>(s)].busy_s[0];
  };
  for (int s = 1; s < stages; ++s) {
    if (compute_busy(s) > compute_busy(out.reported_stage)) out.reported_stage = s;
  }
  out.breakdown = stage_breakdown(out.plan, out.timeline, out.reported_stage);
  const StageBreakdown& b = out.breakdown;

  // The result from the timeline; FLOPs and the rates that follow from the
  // step time by the analytic model's rule (complete_from_step_time).
  SimulationResult& r = out.result;
  r.layout = layout;
  r.step_time_s = out.timeline.step_time_s;
  r.time.compute_s = b.compute_s;
  r.time.optimizer_s = b.optimizer_s;
  r.time.pipeline_bubble_s = b.bubble_s;
  auto exposed = [&](StreamKind k) { return b.exposed_s[static_cast<std::size_t>(k)]; };
  r.exposed_tp_s = exposed(StreamKind::kTensorParallel);
  r.exposed_cp_s = exposed(StreamKind::kContextParallel);
  r.exposed_ep_s = exposed(StreamKind::kExpertParallel);
  r.exposed_pp_s = exposed(StreamKind::kPipelineForward) + exposed(StreamKind::kPipelineBackward);
  r.exposed_dp_s = exposed(StreamKind::kDataParallel) + exposed(StreamKind::kDataParallelGather);
  r.time.exposed_communication_s = b.exposed_communication_s();

  // Memory: each stage's model states with its simulated activation peak; the
  // stage that needs most. Our engine's activations are its arena's, laid out
  // before the step whatever the timeline (engine_arena.h).
  const bool arena_fixed = profile.software == Software::kSextantEngine && engine_arena_modelled(model);
  for (int s = 0; s < stages; ++s) {
    MemoryBreakdown m = stage_memory(model, layout, s, profile.software);
    if (!arena_fixed) m.activations = out.timeline.stages[static_cast<std::size_t>(s)].peak_activation_bytes;
    if (s == 0 || m.total() > r.memory.total()) r.memory = m;
  }
  complete_from_step_time(r, model, cluster);
  return out;
}

}  // namespace sextant::sim
