#include "tools/run_measured_compare.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/training/task_timing.h"

namespace sextant::tools {

CompareReport measured_compare(const RunSettings& s, const sim::ModelConfig& trained,
                               const engine::TrainerOptions& options, const engine::comm::ParallelGroups& groups,
                               const engine::training::TrainingRecord& record, engine::data::TokenBatches& data,
                               const std::string& device_name, int seq, int timed_steps) {
  std::map<std::string, double> measured;  // seconds per step, by task kind
  if (record.timed_task_steps > 0) {
    for (const auto& [name, seconds] : record.task_seconds)
      measured[task_kind(name)] += seconds / record.timed_task_steps;
  } else {
    const std::size_t tokens_per_step = static_cast<std::size_t>(s.layout.gbs) * static_cast<std::size_t>(seq);
    for (const auto& [name, seconds] :
         engine::training::time_tasks_apart(trained, s.layout, options, data, tokens_per_step, groups, timed_steps))
      measured[task_kind(name)] += seconds;
  }
  // An MoE model: the simulator takes the run's measured load of the busiest
  // ep rank (capacity drops and padding included) for the preset's balanced 1.
  sim::ModelConfig simulated = trained;
  std::optional<double> load_factor;
  if (simulated.moe) {
    simulated.moe->capacity_factor = options.moe.capacity_factor;  // the routing kernels it runs
    const double measured_load =
        engine::training::measured_expert_load_factor(groups, record.moe, options.comm_timeout);
    if (measured_load > 0) {
      load_factor = measured_load;
      simulated.moe->expert_load_factor = measured_load;
    }
  }
  const ComparePrediction predicted = predict_for_compare(simulated, s.cluster, s.profile, s.layout);
  // A pipeline: every stage's measured compute, gathered over the rank's pp group.
  const std::vector<double> stage_compute_s =
      engine::training::per_stage(groups, measured_compute_s(predicted, measured), options.comm_timeout);
  CompareReport compare = make_compare_report(predicted, record.median_step_s(), measured, stage_compute_s);
  compare.model = s.model_argument;
  compare.parallel_layout = s.layout;
  compare.layout = compare_layout_text(s.layout);
  compare.profile_name = s.profile.name;
  compare.software = s.profile.software;
  compare.device = device_name;
  compare.seq_length = seq;
  compare.expert_load_factor = load_factor;
  if (simulated.moe) compare.capacity_factor = simulated.moe->capacity_factor;
  return compare;
}

}  // namespace sextant::tools
