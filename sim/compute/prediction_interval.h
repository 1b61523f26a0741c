// The interval a fitted profile puts around a predicted step time.
//
// The fit (`sextant fit-profile`) stores the sd of ln(measured / predicted)
// over its runs; a new run's log error is taken as t-distributed with
// runs − parameters degrees of freedom (Student's t prediction interval,
// e.g. Montgomery & Runger, "Applied Statistics", Sec. 11-6, with the
// parameters' own uncertainty left out: it is small against the residual for a
// handful of parameters). The interval targets 90 % coverage:
// [t·exp(−q·sd), t·exp(+q·sd)], q the 95th percentile of that t distribution.
#pragma once

#include <optional>
#include <utility>

#include "sim/core/cost_profile.h"

namespace sextant::sim {

inline constexpr double kPredictionIntervalCoverage = 0.90;

/// [low, high] around `step_time_s`, or std::nullopt when `profile` has no fit.
std::optional<std::pair<double, double>> step_time_interval_s(double step_time_s,
                                                              const CostProfile& profile);

/// The two-sided quantile multiplier for `coverage` with `degrees_of_freedom`.
double t_quantile(double coverage, double degrees_of_freedom);

}  // namespace sextant::sim
