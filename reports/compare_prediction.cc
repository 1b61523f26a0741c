#include "reports/compare_prediction.h"

#include <algorithm>
#include <cstdint>

#include "sim/compute/prediction_interval.h"
#include "sim/compute/stage_rates.h"
#include "sim/event/event_simulation.h"
#include "sim/plan/task_kind.h"
#include "sim/plan/task_name.h"

namespace sextant::reports {

using sim::task_kind;

namespace {

// The engine's name for a Plan task's kind, and how its time counts. The
// engine runs context parallelism's attention core and its K/V exchanges
// inside its attention task (its own Plan is built with cp = 1), so under
// cp > 1 the simulator's "layer*.attn.core.bwd" and its exchange tasks
// ("...bwd.cp.all_gather+reduce_scatter", "...bwd.cp.ring") are
// "layer*.attn.bwd" there:
// - all_gather (engine/transformer/context_parallel_attention_core.h): the
//   exchanges run before and after the core, so their times add;
// - p2p (engine/transformer/context_parallel_ring_attention_core.h): the ring
//   task runs beside the core task, so the attention task's span is the longer
//   of the two (for the engine's ring the ring task is already the core plus
//   what it does not hide: sim/comm/context_ring_overlap.h).
struct EngineTask {
  std::string kind;
  bool folded = false;  // a cp core or exchange counted in the engine's attention task
  bool ring = false;    // p2p: its time is the longer of the core's and the ring's
  std::string span;     // p2p: the task name the core and its ring share
};

EngineTask engine_task(const std::string& name, const sim::ParallelLayout& layout) {
  EngineTask t{task_kind(name)};
  if (layout.cp == 1) return t;
  const std::string core = ".attn.core.";
  const std::size_t at = t.kind.find(core);
  if (at == std::string::npos) return t;
  t.kind.erase(at + 6, 5);  // ".attn." stays, "core." goes
  if (const std::size_t cp = t.kind.find(".cp."); cp != std::string::npos) t.kind.erase(cp);
  t.folded = true;
  t.ring = layout.cp_comm_type == sim::CpCommType::kP2p;
  if (t.ring) {
    t.span = name;
    if (const std::size_t cp = t.span.find(".cp."); cp != std::string::npos) t.span.erase(cp);
  }
  return t;
}

// Adds each task's time to its engine kind (and stage): a p2p core and its
// ring as the longer of the two.
template <typename Add>
void add_engine_tasks(const sim::EventSimulation& e, const sim::ParallelLayout& layout, std::uint32_t begin,
                      std::uint32_t end, Add add) {
  struct Span {
    std::string kind;
    const sim::Task* task = nullptr;
    double seconds = 0;
  };
  std::map<std::string, Span> spans;
  for (std::uint32_t i = begin; i < end; ++i) {
    const sim::Task& task = e.plan.tasks[i];
    const EngineTask t = engine_task(sim::task_name(e.plan, task), layout);
    if (!t.ring) {
      add(t, task, e.costs[i].duration_s);
      continue;
    }
    Span& s = spans[t.span];
    s.kind = t.kind;
    if (s.task == nullptr || task.kind == sim::TaskKind::kCompute) s.task = &task;
    s.seconds = std::max(s.seconds, e.costs[i].duration_s);
  }
  for (const auto& [name, s] : spans) {
    EngineTask t{s.kind, true, true, name};
    add(t, *s.task, s.seconds);
  }
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
  add_engine_tasks(e, layout, e.plan.stage_begin[0], e.plan.stage_begin[1],
                   [&](const EngineTask& t, const sim::Task&, double seconds) {
                     p.task_seconds_per_step[t.kind] += seconds;
                   });
  p.stage_compute_s.assign(static_cast<std::size_t>(e.plan.num_stages()), 0.0);
  for (int s = 0; s < e.plan.num_stages(); ++s)
    add_engine_tasks(e, layout, e.plan.stage_begin[static_cast<std::size_t>(s)],
                     e.plan.stage_begin[static_cast<std::size_t>(s) + 1],
                     [&](const EngineTask& t, const sim::Task& task, double seconds) {
                       // A cp exchange the engine runs inside its attention task counts as its
                       // compute; recomputation is a compute task too (Pass::kRecompute).
                       if (task.kind != sim::TaskKind::kCompute && !t.folded) return;
                       p.stage_compute_s[static_cast<std::size_t>(s)] += seconds;
                       p.compute_kinds.insert(t.kind);
                     });
  return p;
}

double measured_compute_s(const ComparePrediction& predicted, const std::map<std::string, double>& measured) {
  double sum = 0;
  for (const auto& [kind, seconds] : measured)
    if (predicted.compute_kinds.count(kind) != 0) sum += seconds;
  return sum;
}

}  // namespace sextant::reports
