// The training loop of one rank: draw the global batch, step, record, vote to
// stop, checkpoint when due — what `sextant run` does between its setup and its
// summary (tools/run_training.cc only builds the pieces and prints).
//
// Every rank runs the same loop over the same data stream and leaves it after
// the same step: the stop vote (stop_vote.h) meets all ranks between steps, a
// non-finite step is seen by all (the loss and the gradient norm are reduced
// over the world), and the step count is the run's.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/token_batches.h"
#include "engine/launch/step_watchdog.h"
#include "engine/model/nonfinite_step.h"
#include "engine/task_timer.h"
#include "engine/trainer.h"
#include "engine/training/stop_vote.h"

namespace sextant::engine::training {

struct LoopSettings {
  std::size_t tokens_per_step = 0;  // global batch x sequence: what each rank draws per step
  int first_batch = 0;  // batches of the data stream a resumed run already trained on
  int steps = 1;        // the run ends after this step (counted from the run's start)
  /// Leading steps of this call left out of the step-time median and task
  /// totals: they pay one-off costs (graph capture, cuBLASLt's first calls).
  int untimed_steps = 0;
  NonFinitePolicy on_nonfinite = NonFinitePolicy::kStop;
  int save_interval = 0;  // steps between checkpoints during the run (0: none); the last step's is the caller's
};

struct LoopHooks {
  /// This rank's wish to stop (a Ctrl-C seen by the process), read before each step.
  std::function<bool()> stop_requested = [] { return false; };
  /// After each step: its result, the run's step count so far (first_batch + steps
  /// trained here), and the GPU memory in use at its peak so far.
  std::function<void(const StepResult&, int steps_so_far, std::size_t peak_memory_bytes)> after_step =
      [](const StepResult&, int, std::size_t) {};
  /// A checkpoint due after `batches_drawn` batches (every rank calls it).
  std::function<void(int batches_drawn)> save = [](int) {};
  /// Armed for each step (the stop vote included), disarmed during saves; may be null.
  launch::StepWatchdog* watchdog = nullptr;
};

/// Why a run stopped at a non-finite step (NonFinitePolicy::kStop).
struct NonFiniteStop {
  int step = 0;
  double loss = 0;
  double grad_norm = 0;
  std::string tensor;  // the first whose gradient is not finite; "" when the norm is finite or none was found
};

struct TrainingRecord {
  std::vector<double> losses, lrs, grad_norms;  // per step trained here
  std::vector<double> step_seconds;             // per timed step
  /// Per task name, seconds summed over the timed steps that timed tasks
  /// (TrainerOptions::time_tasks), and the last such step's tasks.
  std::map<std::string, double> task_seconds;
  int timed_task_steps = 0;
  std::vector<TaskTime> last_tasks;
  std::size_t peak_memory_bytes = 0;  // cudaMemGetInfo's in-use bytes, the most seen after a step
  int skipped_steps = 0;              // non-finite gradient norm, no update (NonFinitePolicy::kSkip)
  bool interrupted = false;           // a rank asked to stop
  std::optional<NonFiniteStop> nonfinite;
  int batches_drawn = 0;              // the data stream's position at the end (first_batch + steps trained)
  transformer::MoeStatistics moe;     // this rank's MoE layers' routing over the steps trained here

  int steps() const { return static_cast<int>(losses.size()); }
  /// The median of step_seconds (0 when none was timed).
  double median_step_s() const;
};

/// Trains `trainer` from settings.first_batch to settings.steps on `data`
/// (which the caller has advanced to first_batch). Throws data::DataError from
/// the data stream, and what the trainer throws.
TrainingRecord train(Trainer& trainer, data::TokenBatches& data, StopVote& vote, const LoopSettings& settings,
                     const LoopHooks& hooks);

}  // namespace sextant::engine::training
