// `sextant run --compare`'s rows: the engine's measured step and per-task
// times beside the prediction (compare_prediction.h), by task kind and for
// the whole step, with the error of each. tools/run_compare.h prints them
// (table, Markdown, CSV, JSON) and writes the report folder.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reports/compare_prediction.h"
#include "sim/core/cost_profile.h"
#include "sim/core/parallel_layout.h"

namespace sextant::reports {

struct CompareRow {
  std::string task_kind;  // "step" for the whole step
  double predicted_s = 0;
  double measured_s = 0;  // 0 when not measured
  double error = 0;       // (predicted − measured) / measured; 0 when not measured or `waits`
  /// A pipeline send ("chunk0.pp.send_fwd"): the engine's events hold the
  /// exchange from the moment the stage reaches it, so the measurement is the
  /// wait for the peer (the bubble) plus the transfer, the prediction the
  /// transfer alone; likewise a pipeline's optimizer step, which first sums
  /// the gradient norm (and the tied embedding) with the stages still in
  /// their backward. No error is given, and compare.csv (the calibration
  /// report's input) leaves the row out. The step's row compares the bubble.
  bool waits = false;
};

/// The name of the whole step's row.
inline constexpr const char* kStepRow = "step";

/// Whether a task kind's measurement holds the wait for a peer
/// (CompareRow::waits); `pipeline`: the run has pp > 1.
bool measurement_includes_wait(std::string_view task_kind, bool pipeline);

struct CompareReport {
  std::string model;    // as given to --model (a preset name or a path)
  std::string layout;   // compare_layout_text(parallel_layout)
  sim::ParallelLayout parallel_layout;
  std::string profile_name;
  sim::Software software = sim::Software::kMegatronPublished;
  std::string device;
  long seq_length = 0;
  std::optional<std::pair<double, double>> step_time_interval_s;
  /// An MoE run's measured moe.expert_load_factor, which the prediction took:
  /// the busiest ep rank's expert rows over one rank's routed pairs
  /// (engine/model/expert_load.h; below 1 when a capacity drops pairs).
  std::optional<double> expert_load_factor;
  /// The run's expert capacity factor (moe.capacity_factor; 0: dropless), which the prediction took too.
  double capacity_factor = 0.0;
  std::vector<CompareRow> rows;  // "step" first, then kinds by measured time, largest first
  const CompareRow& step() const { return rows.front(); }
};

/// "tp=2,sp=1,pp=2,dp=2,zero=1,mbs=4,gbs=64,recompute=none": the knobs a
/// reader needs to tell engine runs apart (parallel sizes above 1, sp, the
/// split, ZeRO and the overlaps that change the step), for tables and titles.
std::string compare_layout_text(const sim::ParallelLayout& layout);

/// Rows for every kind predicted or measured, and the step; compare.csv keeps
/// those measured without a wait (CompareRow::waits); with a pipeline,
/// after the step one row per stage, "stage<s>.compute", when every stage's
/// measured compute is given (`measured_stage_compute_s`, stage order: the
/// last stage, with the output layer and no bubble to cool in, paces the step).
CompareReport make_compare_report(const ComparePrediction& predicted, double measured_step_s,
                                  const std::map<std::string, double>& measured_task_seconds,
                                  std::span<const double> measured_stage_compute_s = {});

}  // namespace sextant::reports
