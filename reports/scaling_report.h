// A scaling report written into a folder: report.md, report.csv, one SVG per
// plot and report.html (self-contained: the table and the plots inline).
//
// This is the entry point for every command that has rows to show:
// `sextant report weak-scaling|strong-scaling` evaluates a spec's rows
// (scaling_rows.h) and calls it; `run --compare` can build ReportRows from
// its own results and call it the same way.
#pragma once

#include <string>
#include <vector>

#include "reports/scaling_plots.h"
#include "reports/scaling_rows.h"

namespace sextant::reports {

struct ScalingReportOptions {
  std::string title;
  std::string notes;
  std::string source;   // where the rows came from (spec file, command line)
  std::string engine;   // which engine predicted the rows, in words
  ScalingKind kind = ScalingKind::kStrong;
};

/// Sentences that sum the report up: rows predicted, how the predictions
/// compare with the references (within 3 MFU points, median error), how many
/// layouts the search chose.
std::vector<std::string> scaling_summary(const std::vector<ReportRow>& rows, ScalingKind kind);

/// Writes the report; returns the names of the files written, report.html first.
/// Throws sim::ConfigError when the folder cannot be written.
std::vector<std::string> write_scaling_report(const std::vector<ReportRow>& rows,
                                              const ScalingReportOptions& options,
                                              const std::string& folder);

}  // namespace sextant::reports
