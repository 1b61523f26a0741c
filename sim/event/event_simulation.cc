#include "sim/event/event_simulation.h"

#include <algorithm>

#include "sim/analytic/analytic_model.h"
#include "sim/analytic/power_cap.h"
#include "sim/compute/launch_mode.h"
#include "sim/event/critical_path.h"
#include "sim/memory/memory_model.h"

namespace sextant::sim {

EventSimulation simulate_event(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostProfile& given_profile, const ParallelLayout& layout,
                               const EventOptions& options) {
  // Our engine launches every kernel from the host on several GPUs (compute/launch_mode.h).
  const CostProfile measured_profile = as_engine_launches(given_profile, layout);
  // A measured profile's power cap resolved for this layout (analytic/power_cap.h):
  // the analytic result's (one clock for every GPU) ...
  const CostProfile profile = with_power_cap_resolved(model, cluster, measured_profile, layout);
  EventSimulation out;
  const SimulationResult analytic = simulate_analytic(model, cluster, profile, layout);
  PlanOptions plan_options;
  plan_options.schedule = options.schedule;
  plan_options.pipeline_exchange = profile.behaviour.pipeline_exchange;
  out.plan = build_plan(model, layout, plan_options);
  if (!has_power_cap(measured_profile) || out.plan.num_stages() == 1) {  // one stage: the same clock
    out.costs = task_costs(out.plan, model, cluster, profile, layout, analytic.time.optimizer_s);
    out.timeline = play(out.plan, out.costs, options.engine);
  } else {
    // ... and here each pipeline stage's own (stage_power_cap_slowdowns): the
    // step played at the burst clock, then each stage's tasks costed at its clock.
    const CostProfile burst = without_power_cap(measured_profile);
    const SimulationResult burst_analytic = simulate_analytic(model, cluster, burst, layout);
    const Timeline at_burst =
        play(out.plan, task_costs(out.plan, model, cluster, burst, layout, burst_analytic.time.optimizer_s),
             options.engine);
    std::vector<double> stage_compute_s;
    for (const StageTimeline& s : at_burst.stages)
      stage_compute_s.push_back(s.busy_s[static_cast<std::size_t>(StreamKind::kCompute)]);
    const std::vector<double> slowdowns =
        stage_power_cap_slowdowns(stage_compute_s, burst_analytic.hfu, power_cap_hfu(measured_profile));
    out.costs.resize(out.plan.tasks.size());
    std::vector<bool> costed(slowdowns.size(), false);
    for (std::size_t s = 0; s < slowdowns.size(); ++s) {
      if (costed[s]) continue;
      const CostProfile slowed = with_compute_slowdown(burst, slowdowns[s]);
      const std::vector<TaskCost> costs = task_costs(out.plan, model, cluster, slowed, layout,
                                                     simulate_analytic(model, cluster, slowed, layout).time.optimizer_s);
      // Every stage at this clock takes its tasks' costs from this pass.
      for (std::size_t t = s; t < slowdowns.size(); ++t) {
        if (costed[t] || slowdowns[t] != slowdowns[s]) continue;
        costed[t] = true;
        for (std::uint32_t i = out.plan.stage_begin[t]; i < out.plan.stage_begin[t + 1]; ++i) out.costs[i] = costs[i];
      }
    }
    out.timeline = play(out.plan, out.costs, options.engine);
  }
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

  SimulationResult& r = out.result;
  r = analytic;
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

  const double gpus = layout.total_gpus();
  r.tokens_per_s = static_cast<double>(layout.gbs) * static_cast<double>(model.seq_length) /
                   r.step_time_s;
  r.tokens_per_s_per_gpu = r.tokens_per_s / gpus;
  const double peak = gpus * cluster.gpu.peak_bf16_flops_per_s * r.step_time_s;
  r.mfu = r.model_flops_per_step / peak;
  r.hfu = r.hardware_flops_per_step / peak;

  // Memory: each stage's model states with its simulated activation peak; the
  // stage that needs most.
  for (int s = 0; s < stages; ++s) {
    MemoryBreakdown m = stage_memory(model, layout, s);
    m.activations = out.timeline.stages[static_cast<std::size_t>(s)].peak_activation_bytes;
    if (s == 0 || m.total() > r.memory.total()) r.memory = m;
  }
  r.fits_memory = r.memory.total() <= static_cast<double>(cluster.gpu.memory_bytes);
  r.limiter = limiter_of(r);
  return out;
}

}  // namespace sextant::sim
