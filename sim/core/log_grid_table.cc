#include "sim/core/log_grid_table.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sextant::sim {

namespace {
// Sizes are integers, so ln values closer than this are the same size.
constexpr double kSameLogSize = 1e-9;
}  // namespace

void LogGridTable::add(const std::array<double, kMaxDims>& sizes, double work,
                       const std::array<double, kMaxOutputs>& times_s) {
  Point p{};
  for (int d = 0; d < dims_; ++d) p.log_sizes[d] = std::log(sizes[d]);
  for (int o = 0; o < outputs_; ++o) p.log_time_per_work[o] = std::log(times_s[o] / work);
  points_.push_back(p);
}

void LogGridTable::build() {
  cells_.clear();
  if (points_.empty()) return;
  std::size_t count = 1;
  for (int d = dims_ - 1; d >= 0; --d) {
    std::vector<double>& axis = axes_[d];
    axis.clear();
    for (const Point& p : points_) axis.push_back(p.log_sizes[d]);
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end(),
                           [](double a, double b) { return b - a < kSameLogSize; }),
               axis.end());
    strides_[d] = count;
    count *= axis.size();
    if (count > kMaxCells) return;  // too sparse a cloud to grid: no coverage
  }
  cells_.assign(count * outputs_, std::numeric_limits<double>::quiet_NaN());
  for (const Point& p : points_) {
    std::size_t cell = 0;
    for (int d = 0; d < dims_; ++d) {
      const std::vector<double>& axis = axes_[d];
      const auto it = std::lower_bound(axis.begin(), axis.end(), p.log_sizes[d] - kSameLogSize);
      cell += static_cast<std::size_t>(it - axis.begin()) * strides_[d];
    }
    for (int o = 0; o < outputs_; ++o) cells_[cell * outputs_ + o] = p.log_time_per_work[o];
  }
}

std::optional<std::array<double, LogGridTable::kMaxOutputs>> LogGridTable::lookup(
    const std::array<double, kMaxDims>& sizes, double work) const {
  if (cells_.empty() || !(work > 0)) return std::nullopt;
  // Per dimension: the bracketing axis values and the weight of the upper one.
  std::array<std::size_t, kMaxDims> low{}, high{};
  std::array<double, kMaxDims> upper_weight{}, log_sizes{};
  for (int d = 0; d < dims_; ++d) {
    const std::vector<double>& axis = axes_[d];
    if (!(sizes[d] > 0)) return std::nullopt;  // also NaN
    const double x = std::min(std::log(sizes[d]), axis.back());  // held at the largest size
    if (x < axis.front() - kSameLogSize) return std::nullopt;
    log_sizes[d] = x;
    auto it = std::lower_bound(axis.begin(), axis.end(), x - kSameLogSize);
    const std::size_t i = static_cast<std::size_t>(it - axis.begin());
    if (std::abs(axis[i] - x) <= kSameLogSize) {
      low[d] = high[d] = i;
      upper_weight[d] = 0;
    } else {  // axis[i-1] < x < axis[i]
      low[d] = i - 1;
      high[d] = i;
      upper_weight[d] = (x - axis[i - 1]) / (axis[i] - axis[i - 1]);
    }
  }
  std::array<double, kMaxOutputs> sum{};
  double weight_sum = 0;
  for (unsigned corner = 0; corner < (1u << dims_); ++corner) {
    double weight = 1;
    std::size_t cell = 0;
    for (int d = 0; d < dims_; ++d) {
      const bool up = (corner >> d) & 1u;
      if (up && high[d] == low[d]) { weight = 0; break; }  // exact coordinate: one side
      weight *= up ? upper_weight[d] : 1 - upper_weight[d];
      cell += (up ? high[d] : low[d]) * strides_[d];
    }
    if (weight <= 0) continue;
    const double* y = &cells_[cell * outputs_];
    if (std::isnan(y[0])) continue;  // unmeasured corner
    for (int o = 0; o < outputs_; ++o) sum[o] += weight * y[o];
    weight_sum += weight;
  }
  if (weight_sum <= 1e-12) {
    // No measured corner: Shepard's inverse-square-distance mean over all points.
    sum = {};
    for (const Point& p : points_) {
      double distance_squared = 0;
      for (int d = 0; d < dims_; ++d) {
        const double delta = p.log_sizes[d] - log_sizes[d];
        distance_squared += delta * delta;
      }
      const double weight = 1.0 / std::max(distance_squared, 1e-18);
      for (int o = 0; o < outputs_; ++o) sum[o] += weight * p.log_time_per_work[o];
      weight_sum += weight;
    }
  }
  std::array<double, kMaxOutputs> out{};
  for (int o = 0; o < outputs_; ++o) out[o] = work * std::exp(sum[o] / weight_sum);
  return out;
}

}  // namespace sextant::sim
