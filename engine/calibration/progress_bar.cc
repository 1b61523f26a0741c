#include "engine/calibration/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sextant::engine::calibration {

ProgressBar::ProgressBar(std::ostream& out, double total_work, bool enabled)
    : out_(out), total_work_(std::max(total_work, 1e-30)), enabled_(enabled),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double ProgressBar::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string ProgressBar::format_duration(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char buffer[32];
  if (s >= 60)
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buffer, sizeof buffer, "%llds", s);
  return buffer;
}

std::string ProgressBar::line(double fraction, const std::string& stage, int done_in_stage, int stage_points,
                              double seconds_left) {
  constexpr int kWidth = 20;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * kWidth);
  char percent[8];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100));
  return "calibrate [" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(kWidth - filled), '-') + "] " + percent + "  " + stage + " " +
         std::to_string(done_in_stage) + "/" + std::to_string(stage_points) + "  " +
         format_duration(seconds_left) + " left";
}

void ProgressBar::advance(double work, const std::string& stage, int done_in_stage, int stage_points) {
  done_work_ += work;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done_in_stage != stage_points && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double fraction = std::min(1.0, done_work_ / total_work_);
  const double elapsed = elapsed_s();
  const double left = fraction > 0 ? elapsed * (1.0 - fraction) / fraction : 0.0;
  out_ << "\r" << line(fraction, stage, done_in_stage, stage_points, left) << "   " << std::flush;
}

void ProgressBar::finish() {
  if (!enabled_) return;
  out_ << "\rcalibrate done in " << format_duration(elapsed_s()) << std::string(50, ' ') << "\n" << std::flush;
}

}  // namespace sextant::engine::calibration
