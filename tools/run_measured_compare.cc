#include "tools/run_measured_compare.h"

#include <map>
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
  const ComparePrediction predicted = predict_for_compare(trained, s.cluster, s.profile, s.layout);
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
  return compare;
}

}  // namespace sextant::tools
