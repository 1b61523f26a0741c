#include "sim/compute/prediction_interval.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>

namespace sextant::sim {

double t_quantile(double coverage, double degrees_of_freedom) {
  const boost::math::students_t t(std::max(1.0, degrees_of_freedom));
  return boost::math::quantile(t, 0.5 + coverage / 2);
}

std::optional<std::pair<double, double>> step_time_interval_s(double step_time_s,
                                                              const CostProfile& profile) {
  if (!profile.fit) return std::nullopt;
  const ProfileFit& fit = *profile.fit;
  const double dof = static_cast<double>(fit.runs) - static_cast<double>(fit.parameters.size());
  const double half_width = t_quantile(kPredictionIntervalCoverage, dof) * fit.log_residual_sd;
  return std::make_pair(step_time_s * std::exp(-half_width), step_time_s * std::exp(half_width));
}

}  // namespace sextant::sim
