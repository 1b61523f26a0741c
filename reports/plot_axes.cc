#include "reports/plot_axes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sextant::reports {

AxisScale::AxisScale(double low, double high, double pixel_low, double pixel_high, bool log)
    : low_(low), high_(high), pixel_low_(pixel_low), pixel_high_(pixel_high), log_(log) {}

double AxisScale::to_pixel(double value) const {
  double fraction;
  if (log_) {
    fraction = (std::log(value) - std::log(low_)) / (std::log(high_) - std::log(low_));
  } else {
    fraction = (value - low_) / (high_ - low_);
  }
  return pixel_low_ + fraction * (pixel_high_ - pixel_low_);
}

namespace {
// Heckbert's nice number: 1, 2, 5 or 10 times a power of ten near `x`.
double nice_number(double x, bool round) {
  const double exponent = std::floor(std::log10(x));
  const double fraction = x / std::pow(10.0, exponent);
  double nice;
  if (round) nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
  else nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * std::pow(10.0, exponent);
}
}  // namespace

void nice_linear_ticks(double low, double high, int target_ticks, double& nice_low,
                       double& nice_high, std::vector<double>& ticks) {
  if (!(high > low)) {
    low -= 0.5;
    high += 0.5;
  }
  const double range = nice_number(high - low, false);
  const double step = nice_number(range / std::max(1, target_ticks - 1), true);
  nice_low = std::floor(low / step) * step;
  nice_high = std::ceil(high / step) * step;
  ticks.clear();
  for (double t = nice_low; t <= nice_high + 0.5 * step; t += step) {
    ticks.push_back(std::abs(t) < 1e-9 * step ? 0.0 : t);
  }
}

std::vector<double> log_ticks(double low, double high) {
  std::vector<double> ticks;
  const bool only_decades = std::log10(high / low) > 3;
  for (int e = static_cast<int>(std::floor(std::log10(low))) - 1;
       e <= static_cast<int>(std::ceil(std::log10(high))); ++e) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (only_decades && m != 1.0) continue;
      const double t = m * std::pow(10.0, e);
      if (t >= low * (1 - 1e-9) && t <= high * (1 + 1e-9)) ticks.push_back(t);
    }
  }
  return ticks;
}

std::string tick_label(double value) {
  char buffer[32];
  if (value != 0 && (std::abs(value) >= 1e7 || std::abs(value) < 1e-4)) {
    std::snprintf(buffer, sizeof buffer, "%.2g", value);
    return buffer;
  }
  // Enough decimals for 3 significant digits, then trailing zeros dropped.
  const int magnitude = value == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::abs(value))));
  const int decimals = std::max(0, 2 - magnitude);
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string s = buffer;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

double estimated_text_width_px(const std::string& text, double font_px) {
  return 0.6 * font_px * static_cast<double>(text.size());
}

}  // namespace sextant::reports
