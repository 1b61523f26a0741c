#include "engine/model/lr_schedule.h"

#include <cmath>
#include <cstdio>
#include <numbers>

namespace sextant::engine {

double LrSchedule::at(int step) const {
  if (warmup_steps > 0 && step <= warmup_steps)
    return max_lr * static_cast<double>(step) / warmup_steps;
  if (step > decay_steps) return min_lr;
  const int span = decay_steps - warmup_steps;
  if (span <= 0) return max_lr;
  const double progress = static_cast<double>(step - warmup_steps) / span;
  return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

std::string lr_schedule_problem(const LrSchedule& s) {
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return std::string(text);
  };
  if (!(s.max_lr > 0) || !std::isfinite(s.max_lr))
    return "--lr (" + number(s.max_lr) + ") must be a positive number";
  if (!(s.min_lr >= 0) || s.min_lr > s.max_lr)
    return "--min-lr (" + number(s.min_lr) + ") must be between 0 and --lr (" + number(s.max_lr) + ")";
  if (s.warmup_steps < 0)
    return "--warmup-steps (" + std::to_string(s.warmup_steps) + ") must not be negative";
  if (s.decay_steps < s.warmup_steps)
    return "--lr-decay-steps (" + std::to_string(s.decay_steps) + ") must not be below --warmup-steps (" +
           std::to_string(s.warmup_steps) + ")";
  return {};
}

}  // namespace sextant::engine
