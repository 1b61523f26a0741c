// `sextant report weak-scaling|strong-scaling|calibration`: scaling reports
// from a spec (or, for strong scaling, a quick sweep from flags) and the
// predicted-against-measured report of a `run --compare` folder. Each writes
// report.md, report.csv, SVG plots and a self-contained report.html into --out.
#include <chrono>
#include <memory>
#include <sstream>

#include "reports/calibration_report.h"
#include "reports/report_spec.h"
#include "reports/scaling_report.h"
#include "reports/scaling_rows.h"
#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"
#include "tools/commands.h"

namespace sextant::tools {

namespace {

struct ReportOptions {
  std::string spec;
  std::string out;
  std::string engine;   // empty: the spec's
  std::string profile;  // empty: the spec's, else each GPU's default
  // The flag form of strong scaling.
  std::string model, cluster, layout;
  std::vector<long> gpus;
  int global_batch = 0;
  long seq_length = 0;
  int max_tp = 0;
  bool tp_within_node = false;
  // calibration
  std::string runs;
  std::string title;
};

std::string engine_words(reports::ReportEngine engine) {
  return engine == reports::ReportEngine::kEvent
             ? "event-driven simulator (the analytical search's best 8 layouts replayed)"
             : "analytical model (layouts completed by the search)";
}

void print_written(std::ostream& out, const std::string& folder,
                   const std::vector<std::string>& files) {
  out << "wrote " << folder << "/{";
  for (std::size_t i = 0; i < files.size(); ++i) out << (i ? "," : "") << files[i];
  out << "}\n";
}

int run_scaling(const ReportOptions& o, reports::ScalingKind kind, const CommonOptions& common,
                std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  reports::ReportSpec spec;
  const bool flags = !o.model.empty() || !o.cluster.empty() || !o.gpus.empty();
  if (kind == reports::ScalingKind::kWeak && o.spec.empty()) {
    // weak-scaling has no flag form (add_scaling_options): name only --spec.
    throw sim::ConfigError({{"--spec", 0, 0, "",
                             "required: weak scaling changes the model with the GPU count, so "
                             "its rows come from a report spec, e.g. --spec "
                             "configs/reports/megatron-weak-h100.yaml"}});
  }
  if (o.spec.empty() == !flags) {
    throw sim::ConfigError({{"--spec", 0, 0, "",
                             "give either --spec FILE or --model, --cluster, --gpus and "
                             "--global-batch (not both)"}});
  }
  if (!o.spec.empty()) {
    spec = reports::load_report_spec(o.spec);
  } else {
    std::vector<sim::Diagnostic> missing;
    if (o.model.empty()) missing.push_back({"--model", 0, 0, "", "required with the flag form"});
    if (o.cluster.empty()) missing.push_back({"--cluster", 0, 0, "", "required with the flag form"});
    if (o.gpus.empty()) missing.push_back({"--gpus", 0, 0, "", "required with the flag form, e.g. 64,128,256"});
    if (o.global_batch == 0) missing.push_back({"--global-batch", 0, 0, "", "required with the flag form"});
    sim::throw_if_any(std::move(missing));
    search::SearchConstraints constraints;
    if (o.max_tp > 0) constraints.max_tp = o.max_tp;
    constraints.tp_within_node = o.tp_within_node;
    spec = reports::sweep_spec(o.model, o.cluster, o.gpus, o.global_batch, o.layout, constraints);
    if (o.seq_length > 0) {
      for (reports::ReportRowSpec& row : spec.rows) row.seq_length = o.seq_length;
    }
    std::ostringstream gpus;
    for (std::size_t i = 0; i < o.gpus.size(); ++i) gpus << (i ? "," : "") << o.gpus[i];
    spec.source = "sextant report strong-scaling --model " + o.model + " --cluster " + o.cluster +
                  " --gpus " + gpus.str() + " --global-batch " + std::to_string(o.global_batch) +
                  (o.seq_length > 0 ? " --seq-length " + std::to_string(o.seq_length) : "") +
                  (o.layout.empty() ? "" : " --layout " + o.layout);
  }
  if (o.engine == "event") spec.engine = reports::ReportEngine::kEvent;
  if (o.engine == "analytic") spec.engine = reports::ReportEngine::kAnalytic;
  if (!o.profile.empty()) spec.profile = o.profile;

  const sim::PresetCatalog catalog(common.configs_dir);
  const std::vector<reports::ReportRow> rows = reports::evaluate_rows(spec, catalog);
  reports::ScalingReportOptions options;
  options.title = spec.title;
  options.notes = spec.notes;
  options.source = spec.source;
  options.engine = engine_words(spec.engine);
  options.kind = kind;
  const std::vector<std::string> files = reports::write_scaling_report(rows, options, o.out);
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& line : reports::scaling_summary(rows, kind)) out << line << "\n";
  print_written(out, o.out, files);
  char timing[96];
  std::snprintf(timing, sizeof timing, "%zu rows in %.3f s\n", rows.size(), elapsed_s);
  out << timing;
  for (const reports::ReportRow& r : rows) {
    if (!r.result) return 1;  // the report is written; say that it is incomplete
  }
  return 0;
}

int run_calibration(const ReportOptions& o, std::ostream& out) {
  const std::vector<reports::CalibrationPoint> points = reports::load_calibration_points(o.runs);
  reports::CalibrationReportOptions options;
  if (!o.title.empty()) options.title = o.title;
  options.source = o.runs + "/compare.csv";
  print_written(out, o.out, reports::write_calibration_report(points, options, o.out));
  return 0;
}

void add_scaling_options(CLI::App* cmd, ReportOptions& o, bool flag_form) {
  cmd->add_option("--spec", o.spec, "report spec YAML (configs/reports/*.yaml)");
  cmd->add_option("--out", o.out, "folder to write the report into (created if missing)")
      ->required();
  cmd->add_option("--engine", o.engine,
                  "override the spec's engine: analytic, or event (the search's best 8 layouts\n"
                  "replayed on the event-driven simulator)")
      ->check(CLI::IsMember({"analytic", "event"}));
  cmd->add_option("--profile", o.profile, "cost profile YAML (default: each GPU's own)");
  if (!flag_form) return;
  cmd->add_option("--model", o.model, "model preset or YAML (flag form, instead of --spec)");
  cmd->add_option("--cluster", o.cluster, "cluster preset or YAML (flag form)");
  cmd->add_option("--gpus", o.gpus, "GPU counts, comma-separated (flag form)")->delimiter(',');
  cmd->add_option("--global-batch", o.global_batch, "global batch in sequences (flag form)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--layout", o.layout,
                  "knobs fixed at every point (flag form); the rest are searched at each point");
  cmd->add_option("--seq-length", o.seq_length,
                  "training sequence length (flag form; overrides the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-tp", o.max_tp, "largest tensor-parallel size the search tries")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--tp-within-node", o.tp_within_node, "keep every TP group inside one node");
}

}  // namespace

CommandRunner add_report_command(CLI::App& app, const CommonOptions& common) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* report = app.add_subcommand(
      "report",
      "Scaling and calibration reports: report.md, report.csv, SVG plots and a self-contained\n"
      "report.html written into --out.");
  report->require_subcommand(1);
  CLI::App* weak = report->add_subcommand(
      "weak-scaling",
      "Weak scaling from a spec: the model grows with the GPU count.\n\n"
      "Example:\n  sextant report weak-scaling --spec configs/reports/megatron-weak-h100.yaml "
      "--out out/weak");
  add_scaling_options(weak, *o, false);
  CLI::App* strong = report->add_subcommand(
      "strong-scaling",
      "Strong scaling: one model and global batch on more and more GPUs, from a spec or flags.\n"
      "Each point's layout is the search's fastest that fits, unless the spec fixes it.\n\n"
      "Examples:\n"
      "  sextant report strong-scaling --spec configs/reports/gpt3-175b-strong-h100.yaml --out out/strong\n"
      "  sextant report strong-scaling --model llama3-70b --cluster dgx-h100 \\\n"
      "      --gpus 64,128,256,512,1024 --global-batch 1024 --out out/l70");
  add_scaling_options(strong, *o, true);
  CLI::App* calibration = report->add_subcommand(
      "calibration",
      "Predicted against measured task times from a `sextant run --compare --report DIR` folder\n"
      "(its compare.csv): log-log scatter with y = x and a ±5 % band, error per task kind.\n\n"
      "Example:\n  sextant report calibration --runs tests/data/calibration --out out/calib");
  calibration->add_option("--runs", o->runs, "folder holding compare.csv")->required();
  calibration->add_option("--out", o->out, "folder to write the report into")->required();
  calibration->add_option("--title", o->title, "title of the report");
  return [o, &common, weak, strong](std::ostream& out) {
    if (weak->parsed()) return run_scaling(*o, reports::ScalingKind::kWeak, common, out);
    if (strong->parsed()) return run_scaling(*o, reports::ScalingKind::kStrong, common, out);
    return run_calibration(*o, out);
  };
}

}  // namespace sextant::tools
