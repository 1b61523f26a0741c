// The validation errors by group of cases (source, GPU, precision, dense or
// MoE), so that a regression in one family cannot hide in the overall median.
#pragma once

#include <string>
#include <vector>

#include "reports/validation_report.h"

namespace sextant::reports {

struct GroupSummary {
  std::string dimension;  // "source", "gpu", "precision", "model"
  std::string name;       // e.g. "NVIDIA/NeMo docs/...", "dgx-h100", "fp8", "dense"
  int cases = 0;
  int predicted = 0;
  double median_abs_error = 0;
  double p90_abs_error = 0;
  double worst_abs_error = 0;
};

/// One summary per value of each dimension, in the order the values first appear.
std::vector<GroupSummary> summarize_by_group(const ValidationSummary& summary);

/// The first two words of a case's source ("NVIDIA/NeMo docs/source/...",
/// "Narayanan et al."): which publication, without its details.
std::string source_group(const std::string& source);

}  // namespace sextant::reports
