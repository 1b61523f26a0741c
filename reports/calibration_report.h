// Predicted against measured task times, as `sextant run --compare --report DIR`
// writes them (compare.csv: layout,task_kind,predicted_s,measured_s,error;
// RFC 4180), rendered as a report: a log-log scatter of predicted against
// measured with the y = x line and a ±5 % band, bars of the error per task
// kind, and the tables behind them.
#pragma once

#include <string>
#include <vector>

namespace sextant::reports {

struct CalibrationPoint {
  std::string layout;     // the layout spec the run used
  std::string task_kind;  // e.g. "gemm", "attention", "tp.all_reduce", "step"
  double predicted_s = 0;
  double measured_s = 0;
  /// (predicted − measured) / measured, recomputed from the two times (the
  /// file's own error column is checked to be a number, not trusted).
  double error = 0;
};

/// Reads DIR/compare.csv. Throws sim::ConfigError naming file:line for a
/// missing file, a header without the five columns, or a bad number.
std::vector<CalibrationPoint> load_calibration_points(const std::string& runs_folder);

struct CalibrationReportOptions {
  std::string title = "Predicted against measured task times";
  std::string source;  // the folder read, in words
};

/// Writes report.html, report.md, report.csv, scatter.svg and task_kinds.svg
/// into `folder`; returns the names written, report.html first.
std::vector<std::string> write_calibration_report(const std::vector<CalibrationPoint>& points,
                                                  const CalibrationReportOptions& options,
                                                  const std::string& folder);

}  // namespace sextant::reports
