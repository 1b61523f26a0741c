// `sextant run --compare`'s output: the comparison of the engine's measured
// step and tasks with the event simulator's prediction (reports/
// compare_prediction.h, compare_report.h) as a table, Markdown, CSV and
// JSON, the report folder --report writes, and the JSON read back by
// `sextant fit-profile`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "reports/compare_prediction.h"
#include "reports/compare_report.h"
#include "sim/plan/task_kind.h"

namespace sextant::tools {

// The comparison's library types and functions, by the names the command
// line has always used for them.
using reports::ComparePrediction;
using reports::CompareReport;
using reports::CompareRow;
using reports::compare_layout_text;
using reports::make_compare_report;
using reports::measured_compute_s;
using reports::measurement_includes_wait;
using reports::predict_for_compare;
using sim::task_kind;

nlohmann::ordered_json compare_json(const CompareReport& report);
/// Inverse of compare_json for what the fit needs (model, layout, seq, step
/// times); throws sim::ConfigError naming `file` when a field is missing.
CompareReport compare_from_json(const nlohmann::json& j, const std::string& file);
std::string compare_table(const CompareReport& report);
std::string compare_markdown(const CompareReport& report);
/// Columns: layout, task_kind, predicted_s, measured_s, error.
std::string compare_csv(const CompareReport& report);
/// Writes compare.md, compare.csv and compare.json into `dir` (created), and
/// the calibration report of those points (report.html, report.md, report.csv,
/// scatter.svg, task_kinds.svg: reports/calibration_report.h);
/// throws sim::ConfigError naming --report when it cannot.
void write_compare_report(const CompareReport& report, const std::string& dir);

}  // namespace sextant::tools
