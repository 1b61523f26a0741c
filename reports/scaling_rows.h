// The rows of a scaling report: each spec row's model and cluster loaded, its
// layout completed by the search (the knobs the spec leaves out), simulated,
// and set beside its published or measured value.
//
// A ReportRow is also what other commands hand to write_scaling_report
// (scaling_report.h) when they have their own results, e.g. `run --compare`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/report_spec.h"
#include "sim/analytic/simulation_result.h"
#include "sim/core/model_config.h"
#include "sim/core/preset_catalog.h"

namespace sextant::reports {

/// A step-time interval [low_s, high_s] (e.g. from a measured profile's spread).
struct StepTimeInterval {
  double low_s = 0, high_s = 0;
};

namespace detail {
template <typename Value>
std::optional<StepTimeInterval> interval_from(const Value& v) {
  if constexpr (requires { v.has_value(); *v; }) {
    if (!v.has_value()) return std::nullopt;
    return interval_from(*v);
  } else if constexpr (requires { v.low_s; v.high_s; }) {
    return StepTimeInterval{static_cast<double>(v.low_s), static_cast<double>(v.high_s)};
  } else if constexpr (requires { v.low; v.high; }) {
    return StepTimeInterval{static_cast<double>(v.low), static_cast<double>(v.high)};
  } else if constexpr (requires { v.first; v.second; }) {
    return StepTimeInterval{static_cast<double>(v.first), static_cast<double>(v.second)};
  } else if constexpr (requires { v[0]; v[1]; v.size(); }) {
    if (v.size() < 2) return std::nullopt;
    return StepTimeInterval{static_cast<double>(v[0]), static_cast<double>(v[1])};
  } else {
    return std::nullopt;
  }
}
}  // namespace detail

/// The step-time interval a result carries, or nothing: results of measured
/// profiles may carry `step_time_interval_s` (added by the calibration work) as
/// an optional or plain (low, high) pair, a struct of low_s/high_s or low/high,
/// or a two-element array. Read whichever this build's SimulationResult has.
template <typename Result>
std::optional<StepTimeInterval> step_time_interval_of(const Result& r) {
  if constexpr (requires { r.step_time_interval_s; }) {
    return detail::interval_from(r.step_time_interval_s);
  } else {
    return std::nullopt;
  }
}


struct ReportRow {
  ReportRowSpec spec;
  sim::ModelConfig model;              // with the spec's overrides applied
  double peak_flops_per_s = 0;         // the GPU's dense bf16 peak (what MFU divides by)
  std::optional<sim::SimulationResult> result;  // empty when nothing valid fits
  std::string failure;                 // why there is no result
  std::vector<std::string> searched;   // knobs the search chose, as "pp=4"
  std::optional<StepTimeInterval> step_time_interval;
  long evaluated_layouts = 0;          // layouts the search considered for this row

  /// A prediction and a published/measured value to set beside it.
  bool reference_available() const { return result.has_value() && spec.reference.has_value(); }
};

/// Evaluates every row. Rows that cannot be predicted (nothing fits, invalid
/// knobs) keep their failure and do not stop the others; bad presets throw
/// sim::ConfigError.
std::vector<ReportRow> evaluate_rows(const ReportSpec& spec, const sim::PresetCatalog& catalog);

/// The knobs of `complete` that `partial` left out, as "knob=value".
std::vector<std::string> searched_knobs(const sim::PartialLayout& partial,
                                        const sim::ParallelLayout& complete);

/// What a row's reference value means for the step time: the published step
/// time, or the one that gives the published throughput or MFU for this
/// model's FLOPs (throughput and MFU are inversely proportional to step time
/// at a fixed model, batch and GPU count). Empty without a reference or result.
std::optional<double> reference_step_time_s(const ReportRow& row);

/// The row's predicted value in the reference's metric.
double predicted_metric(const ReportRow& row, ReferenceMetric metric);

}  // namespace sextant::reports
