// Axis scales and tick positions for the report plots.
//
// Linear axes get "nice" ticks (1, 2 or 5 times a power of ten; Heckbert,
// "Nice numbers for graph labels", Graphics Gems, 1990); logarithmic axes get
// ticks at chosen values (the GPU counts of a sweep) or at 1-2-5 steps per decade.
#pragma once

#include <string>
#include <vector>

namespace sextant::reports {

/// Maps data values in [low, high] to pixels in [pixel_low, pixel_high]
/// (pixel_high < pixel_low for a y axis, whose pixels grow downwards).
class AxisScale {
 public:
  AxisScale(double low, double high, double pixel_low, double pixel_high, bool log);
  double to_pixel(double value) const;
  double low() const { return low_; }
  double high() const { return high_; }
  bool log() const { return log_; }

 private:
  double low_, high_, pixel_low_, pixel_high_;
  bool log_;
};

/// Range [low, high] widened to nice tick boundaries with about `target_ticks`
/// ticks; `ticks` receives the tick values. low == high is widened by one unit.
void nice_linear_ticks(double low, double high, int target_ticks, double& nice_low,
                       double& nice_high, std::vector<double>& ticks);

/// Ticks of a logarithmic axis over [low, high]: every 1, 2 and 5 times a power
/// of ten inside it (only the powers of ten when the range spans more than 3 decades).
std::vector<double> log_ticks(double low, double high);

/// A tick label: the shortest of up to 3 significant digits that shows `value`
/// ("0.05", "12", "1536"; "2.5e+07" style only from 1e7 up or below 1e-4).
std::string tick_label(double value);

/// Width in pixels a label of `text` takes at `font_px`, estimated for a
/// proportional sans-serif font (0.6 em per character: digits are ~0.55 em).
double estimated_text_width_px(const std::string& text, double font_px);

}  // namespace sextant::reports
