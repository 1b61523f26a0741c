// `sextant run --compare`: the engine's measured step and per-task times
// beside the event simulator's prediction for the same model, layout and
// profile, by Plan task kind ("layer*.attn.fwd", "optimizer.step", ...) and
// for the whole step. Built without CUDA, so the comparison is tested on the
// CPU; run_training.cc feeds it the measurements.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::tools {

/// "stage0.mb3.layer17.attn.fwd" -> "layer*.attn.fwd": one row per kind of task.
/// Plain string scans (it runs for every task of every timed step).
std::string task_kind(std::string_view name);

/// The simulator's side: the event engine's step time (kernels in the step's
/// CUDA graph) and each task kind's summed duration over one step (stage 0,
/// the only stage on one GPU) with kernels launched one by one, as the engine
/// runs them when it times tasks.
struct ComparePrediction {
  double step_time_s = 0;
  std::optional<std::pair<double, double>> step_time_interval_s;  // with a fitted profile
  std::map<std::string, double> task_seconds_per_step;
  /// Per pipeline stage, its forward, backward and recomputation tasks' time
  /// per step (no communication, no optimizer: the engine's optimizer task
  /// also waits for the other stages), kernels launched one by one; and the
  /// task kinds they are, to sum a stage's measured tasks the same way.
  std::vector<double> stage_compute_s;
  std::set<std::string> compute_kinds;
};

/// A stage's measured compute: its measured task kinds among
/// `predicted.compute_kinds`, summed.
double measured_compute_s(const ComparePrediction& predicted, const std::map<std::string, double>& measured);
ComparePrediction predict_for_compare(const sim::ModelConfig& model,
                                      const sim::ClusterConfig& cluster,
                                      const sim::CostProfile& profile,
                                      const sim::ParallelLayout& layout);

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
