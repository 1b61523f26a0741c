// A one-line progress bar with an estimate of the time left, for stderr:
//   calibrate [#########-----------]  45%  linear 212/650  2m01s left
// Work is counted in estimated seconds (each point's roofline time times its
// launches), so the estimate follows the expensive points, not the count.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace sextant::engine::calibration {

class ProgressBar {
 public:
  /// total_work: the sum of every point's estimated cost, in any unit.
  ProgressBar(std::ostream& out, double total_work, bool enabled);
  /// Adds `work` done and redraws, naming the stage and its count.
  void advance(double work, const std::string& stage, int done_in_stage, int stage_points);
  /// Ends the line ("done in 3m12s").
  void finish();
  double elapsed_s() const;

  /// "3m12s", "45s": the bar's time format.
  static std::string format_duration(double seconds);
  /// The bar itself for a fraction done and seconds left (no clock): what advance() draws.
  static std::string line(double fraction, const std::string& stage, int done_in_stage, int stage_points,
                          double seconds_left);

 private:
  std::ostream& out_;
  double total_work_;
  double done_work_ = 0;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace sextant::engine::calibration
