// The scaling report's table, in the shape practitioners read: Megatron-LM's
// scaling table and NeMo's performance summary (model, size, shape, GPUs,
// precision, batch, parallel sizes, tokens/s/GPU, model TFLOP/s/GPU, MFU,
// aggregate PFLOP/s), plus memory per GPU, step time (with its interval when
// the result has one), the published or measured value and the error.
#pragma once

#include <string>
#include <vector>

#include "reports/report_table.h"
#include "reports/scaling_rows.h"

namespace sextant::reports {

/// The distinct reference sources of `rows`, in order of first use; a row's
/// "src" cell is its 1-based index here.
std::vector<std::string> reference_sources(const std::vector<ReportRow>& rows);

Table scaling_table(const std::vector<ReportRow>& rows);

/// "1.7B", "175B", "350M": total parameters, for tables and plot labels.
std::string model_size_label(const sim::ModelConfig& model);

/// `value` with `decimals` decimals.
std::string fixed(double value, int decimals);

/// The error of a prediction against its reference, in the reference's
/// metric: MFU in percentage points (predicted − reference), the rest as a
/// relative error in percent.
double reference_error(const ReportRow& row);

}  // namespace sextant::reports
