// Learning rate per step: linear warmup, then cosine decay to a floor — the
// schedule of GPT-3 (Brown et al. 2020, App. B) and Megatron-LM's
// --lr-decay-style cosine (OptimizerParamScheduler.get_lr):
//   step <= warmup:          lr * step / warmup
//   warmup < step <= decay:  min + (lr - min) * 0.5 * (1 + cos(pi * (step - warmup) / (decay - warmup)))
//   step > decay:            min
// Steps count from 1 (the first update uses lr / warmup, not 0).
#pragma once

#include <string>

namespace sextant::engine {

struct LrSchedule {
  double max_lr = 3e-4;
  double min_lr = 3e-5;
  int warmup_steps = 0;
  int decay_steps = 0;  // the step where the cosine reaches min_lr; usually the run's length

  /// The learning rate of update `step` (1-based).
  double at(int step) const;
};

/// Why `schedule` is unusable ("--min-lr (0.1) is above --lr (0.01)"); empty when fine.
std::string lr_schedule_problem(const LrSchedule& schedule);

}  // namespace sextant::engine
