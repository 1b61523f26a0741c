#include "reports/compare_prediction.h"

#include "sim/compute/prediction_interval.h"
#include "sim/compute/stage_rates.h"
#include "sim/event/event_simulation.h"
#include "sim/plan/task_kind.h"
#include "sim/plan/task_name.h"

namespace sextant::reports {

using sim::task_kind;

namespace {

// The engine's name for a Plan task's kind. Under cp_comm_type=all_gather the
// engine runs the attention core and its K/V exchanges inside the attention
// task (engine/transformer/context_parallel_attention_core.h; its own Plan is
// built with cp = 1), so the simulator's "layer*.attn.core.bwd" and
// "layer*.attn.core.bwd.cp.all_gather+reduce_scatter" are "layer*.attn.bwd" there.
std::string engine_kind(std::string kind, const sim::ParallelLayout& layout, bool* folded = nullptr) {
  if (folded != nullptr) *folded = false;
  if (layout.cp == 1 || layout.cp_comm_type != sim::CpCommType::kAllGather) return kind;
  const std::string core = ".attn.core.";
  const std::size_t at = kind.find(core);
  if (at == std::string::npos) return kind;
  kind.erase(at + 6, 5);  // ".attn." stays, "core." goes
  if (const std::size_t cp = kind.find(".cp."); cp != std::string::npos) kind.erase(cp);
  if (folded != nullptr) *folded = true;
  return kind;
}

}  // namespace

ComparePrediction predict_for_compare(const sim::ModelConfig& model,
                                      const sim::ClusterConfig& cluster,
                                      const sim::CostProfile& profile,
                                      const sim::ParallelLayout& layout) {
  sim::EventOptions options;
  options.critical_path = false;
  ComparePrediction p;
  p.step_time_s = sim::simulate_event(model, cluster, profile, layout, options).result.step_time_s;
  p.step_time_interval_s = sim::step_time_interval_s(p.step_time_s, profile);
  // The tasks are measured with their kernels launched one by one (CUDA events
  // cannot time inside a graph replay): predict them so (sim/compute/stage_rates.h).
  options.conditions = sim::task_timing_conditions(profile, model, layout);
  const sim::EventSimulation e = sim::simulate_event(model, cluster, profile, layout, options);
  for (std::uint32_t i = e.plan.stage_begin[0]; i < e.plan.stage_begin[1]; ++i)
    p.task_seconds_per_step[engine_kind(task_kind(sim::task_name(e.plan, e.plan.tasks[i])), layout)] +=
        e.costs[i].duration_s;
  p.stage_compute_s.assign(static_cast<std::size_t>(e.plan.num_stages()), 0.0);
  for (int s = 0; s < e.plan.num_stages(); ++s)
    for (std::uint32_t i = e.plan.stage_begin[static_cast<std::size_t>(s)];
         i < e.plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++i) {
      const sim::Task& t = e.plan.tasks[i];
      bool folded = false;  // a cp exchange the engine runs inside its attention task counts as its compute
      const std::string kind = engine_kind(task_kind(sim::task_name(e.plan, t)), layout, &folded);
      if (t.kind != sim::TaskKind::kCompute && !folded) continue;  // recomputation is a compute task too (Pass::kRecompute)
      p.stage_compute_s[static_cast<std::size_t>(s)] += e.costs[i].duration_s;
      p.compute_kinds.insert(kind);
    }
  return p;
}

double measured_compute_s(const ComparePrediction& predicted, const std::map<std::string, double>& measured) {
  double sum = 0;
  for (const auto& [kind, seconds] : measured)
    if (predicted.compute_kinds.count(kind) != 0) sum += seconds;
  return sum;
}

}  // namespace sextant::reports
