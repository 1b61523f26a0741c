// The scaling report's plots, each an SVG document with its file name:
// MFU and throughput against GPUs (with the ideal linear-scaling line for
// strong scaling), scaling efficiency, the step-time breakdown of each point
// as stacked bars, and predicted beside published/measured MFU.
#pragma once

#include <string>
#include <vector>

#include "reports/scaling_rows.h"

namespace sextant::reports {

enum class ScalingKind {
  kWeak,    // the model grows with the GPUs: ideal is constant per-GPU throughput
  kStrong,  // one model and batch on more GPUs: ideal is throughput ∝ GPUs
};

struct NamedPlot {
  std::string file;     // e.g. "mfu.svg"
  std::string caption;  // one sentence for the page
  std::string svg;
};

/// The plots for `rows` (rows without a result are left out of them).
std::vector<NamedPlot> scaling_plots(const std::vector<ReportRow>& rows, ScalingKind kind);

/// Scaling efficiency of each row against the first row with a result, in
/// percent: strong, tokens/s per GPU relative to it; weak, model FLOP/s per
/// GPU (MFU on one GPU type) relative to it. NaN for rows without a result.
std::vector<double> scaling_efficiency_percent(const std::vector<ReportRow>& rows,
                                               ScalingKind kind);

}  // namespace sextant::reports
