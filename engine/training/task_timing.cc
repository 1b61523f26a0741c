#include "engine/training/task_timing.h"

#include <cstdint>

#include "engine/comm/host_gather.h"

namespace sextant::engine::training {

std::map<std::string, double> time_tasks_apart(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                                               TrainerOptions options, data::TokenBatches& data, std::size_t tokens_per_step,
                                               const comm::ParallelGroups& groups, int steps) {
  options.time_tasks = true;
  Trainer trainer(model, layout, options, groups);
  std::vector<std::int32_t> inputs(tokens_per_step), targets(tokens_per_step);
  std::map<std::string, double> seconds;
  for (int i = 0; i <= steps; ++i) {
    data.next(inputs, targets);
    const StepResult r = trainer.step(inputs, targets);
    if (i == 0) continue;  // the warm-up: cuBLASLt's first calls
    for (const TaskTime& t : r.tasks) seconds[t.name] += t.seconds / steps;
  }
  return seconds;
}

std::vector<double> per_stage(const comm::ParallelGroups& groups, double seconds, std::chrono::milliseconds timeout) {
  comm::Communicator* pipeline = groups.spanning(sim::ParallelGroup::kPp);
  if (pipeline == nullptr) return {};
  std::vector<double> stages;
  for (const float each : comm::all_gather_on_host(*pipeline, static_cast<float>(seconds), timeout))
    stages.push_back(each);
  return stages;
}

}  // namespace sextant::engine::training
