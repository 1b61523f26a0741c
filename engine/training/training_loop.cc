#include "engine/training/training_loop.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda_check.h"

namespace sextant::engine::training {

namespace {

std::size_t device_memory_in_use() {
  std::size_t free_bytes = 0, total_bytes = 0;
  SEXTANT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

}  // namespace

double TrainingRecord::median_step_s() const {
  if (step_seconds.empty()) return 0;
  std::vector<double> v = step_seconds;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

TrainingRecord train(Trainer& trainer, data::TokenBatches& data, StopVote& vote, const LoopSettings& settings,
                     const LoopHooks& hooks) {
  TrainingRecord record;
  std::vector<std::int32_t> inputs(settings.tokens_per_step), targets(settings.tokens_per_step);
  launch::StepWatchdog* const watchdog = hooks.watchdog;
  if (watchdog != nullptr) watchdog->arm(settings.first_batch + 1);  // each step's stop vote included
  for (int i = settings.first_batch; i < settings.steps && !(record.interrupted = vote.any_rank(hooks.stop_requested()));
       ++i) {
    data.next(inputs, targets);
    StepResult r = trainer.step(inputs, targets);
    if (!step_is_finite(r.loss, r.grad_norm) && settings.on_nonfinite == NonFinitePolicy::kStop) {
      // Every rank sees the same loss and norm, so all stop here together (and
      // all take part in the search's reductions).
      const std::string tensor = std::isfinite(r.grad_norm) ? "" : trainer.first_nonfinite_gradient();
      record.nonfinite = NonFiniteStop{r.step, r.loss, r.grad_norm, tensor};
      break;
    }
    record.peak_memory_bytes = std::max(record.peak_memory_bytes, device_memory_in_use());
    if (r.skipped) ++record.skipped_steps;
    record.losses.push_back(r.loss);
    record.lrs.push_back(r.lr);
    record.grad_norms.push_back(r.grad_norm);
    transformer::accumulate(record.moe, r.moe);
    if (i - settings.first_batch >= settings.untimed_steps) {
      record.step_seconds.push_back(r.seconds);
      if (!r.tasks.empty()) {
        ++record.timed_task_steps;
        for (const TaskTime& t : r.tasks) record.task_seconds[t.name] += t.seconds;
        record.last_tasks = r.tasks;
      }
    }
    hooks.after_step(r, i + 1, record.peak_memory_bytes);
    if (settings.save_interval > 0 && (i + 1) % settings.save_interval == 0 && i + 1 < settings.steps) {
      if (watchdog != nullptr) watchdog->disarm();  // a save is not counted: writing a large shard may take minutes
      hooks.save(i + 1);
    }
    if (watchdog != nullptr) watchdog->arm(i + 2);
  }
  if (watchdog != nullptr) watchdog->disarm();
  record.batches_drawn = settings.first_batch + record.steps();
  // One GPU: no vote after the last step, so a signal during it is read here.
  if (!vote.spans_ranks() && !record.nonfinite) record.interrupted = record.interrupted || hooks.stop_requested();
  return record;
}

}  // namespace sextant::engine::training
