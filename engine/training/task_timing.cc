#include "engine/training/task_timing.h"

#include <algorithm>
#include <cstdint>

#include "engine/comm/host_gather.h"
#include "engine/model/expert_load.h"

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

double measured_expert_load_factor(const comm::ParallelGroups& groups, const transformer::MoeStatistics& moe,
                                   std::chrono::milliseconds timeout) {
  comm::Communicator* ep = groups.spanning(sim::ParallelGroup::kEp);
  std::vector<double> rows = rows_by_ep_rank(moe.expert_rows, ep == nullptr ? 1 : ep->size());
  if (ep != nullptr)  // every source's rows for each ep rank's experts
    for (double& r : rows) {
      double sum = 0;
      for (const float each : comm::all_gather_on_host(*ep, static_cast<float>(r), timeout)) sum += each;
      r = sum;
    }
  double pairs = 0;
  for (const std::vector<std::int64_t>& layer : moe.expert_tokens)
    for (const std::int64_t tokens : layer) pairs += static_cast<double>(tokens);
  double factor = expert_load_factor(rows, pairs);
  // Another ep group (dp = ep x expert-dp) may be busier: the step waits for the busiest.
  comm::Communicator* dp = groups.spanning(sim::ParallelGroup::kDp);
  if (dp != nullptr && (ep == nullptr || dp->size() > ep->size()))
    for (const float each : comm::all_gather_on_host(*dp, static_cast<float>(factor), timeout))
      factor = std::max(factor, static_cast<double>(each));
  return factor;
}

}  // namespace sextant::engine::training
