#include "tools/run_compare.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "reports/calibration_report.h"
#include "sim/compute/prediction_interval.h"
#include "sim/core/config_error.h"
#include "sim/core/text_format.h"

namespace sextant::tools {

namespace {

std::string error_text(const CompareRow& r) {
  if (r.waits) return "with wait";
  return r.measured_s > 0 ? sim::format_number("%+.1f %%", 100 * r.error) : "-";
}

// The measured MoE load the prediction took, in words.
std::string expert_load_text(double factor) {
  return "MoE: the prediction took the measured moe.expert_load_factor " + sim::format_number("%.3f", factor) +
         " (the busiest ep rank's expert rows over one rank's routed pairs; below 1: a capacity dropped pairs)";
}

}  // namespace

nlohmann::ordered_json compare_json(const CompareReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["layout"] = {{"mbs", r.parallel_layout.mbs},
                 {"gbs", r.parallel_layout.gbs},
                 {"recompute", std::string(sim::to_string(r.parallel_layout.recompute))},
                 {"gpus", r.parallel_layout.total_gpus()},
                 {"spec", r.parallel_layout.to_spec()}};
  j["seq_length"] = r.seq_length;
  j["device"] = r.device;
  j["profile"] = {{"name", r.profile_name}, {"software", std::string(sim::to_string(r.software))}};
  const CompareRow& step = r.step();
  j["predicted_step_time_s"] = step.predicted_s;
  j["measured_step_time_s"] = step.measured_s;
  j["step_time_error"] = step.error;
  if (r.step_time_interval_s) {
    j["step_time_interval_s"] = {r.step_time_interval_s->first, r.step_time_interval_s->second};
    j["step_time_interval_coverage"] = sim::kPredictionIntervalCoverage;
  }
  if (r.expert_load_factor) j["expert_load_factor"] = *r.expert_load_factor;
  if (r.capacity_factor > 0) j["capacity_factor"] = r.capacity_factor;
  nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
  for (std::size_t i = 1; i < r.rows.size(); ++i)
    tasks.push_back({{"task_kind", r.rows[i].task_kind},
                     {"predicted_s", r.rows[i].predicted_s},
                     {"measured_s", r.rows[i].measured_s},
                     {"error", r.rows[i].waits ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.rows[i].error)},
                     {"measured_includes_wait", r.rows[i].waits}});
  j["tasks"] = tasks;
  return j;
}

CompareReport compare_from_json(const nlohmann::json& j, const std::string& file) {
  auto fail = [&](const std::string& key, const std::string& message) {
    throw sim::ConfigError({{file, 0, 0, key, message}});
  };
  CompareReport r;
  try {
    for (const char* key : {"model", "layout", "seq_length", "predicted_step_time_s",
                            "measured_step_time_s"})
      if (!j.contains(key))
        fail(key, "missing; is this the output of `sextant run --compare --format json`?");
    r.model = j.at("model").get<std::string>();
    const nlohmann::json& l = j.at("layout");
    if (l.contains("spec")) {
      r.parallel_layout = sim::layout_from_spec(l.at("spec").get<std::string>(), file);
    } else {
      // Written before the layout carried its spec: every such run trained on one GPU.
      r.parallel_layout.mbs = l.at("mbs").get<int>();
      r.parallel_layout.gbs = l.at("gbs").get<int>();
      const sim::PartialLayout p =
          sim::parse_layout("recompute=" + l.at("recompute").get<std::string>(), file);
      r.parallel_layout.recompute = p.recompute.value_or(sim::Recompute::kNone);
      r.parallel_layout.sp = false;
      r.parallel_layout.overlap_grad_reduce = false;
    }
    r.layout = compare_layout_text(r.parallel_layout);
    r.seq_length = j.at("seq_length").get<long>();
    if (j.contains("device")) r.device = j.at("device").get<std::string>();
    r.rows.push_back({reports::kStepRow, j.at("predicted_step_time_s").get<double>(),
                      j.at("measured_step_time_s").get<double>(), 0});
    if (j.contains("step_time_error")) r.rows.back().error = j.at("step_time_error").get<double>();
    if (r.rows.back().measured_s <= 0) fail("measured_step_time_s", "must be positive");
    if (j.contains("expert_load_factor")) r.expert_load_factor = j.at("expert_load_factor").get<double>();
    if (j.contains("capacity_factor")) r.capacity_factor = j.at("capacity_factor").get<double>();
  } catch (const nlohmann::json::exception& e) {
    fail("", std::string("not a `run --compare` JSON: ") + e.what());
  }
  return r;
}

std::string compare_table(const CompareReport& r) {
  std::string out = "predicted (" + r.profile_name + ", " + std::string(sim::to_string(r.software)) +
                    ", event simulator) vs measured (" + r.device + "), " + r.model + " " + r.layout +
                    "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %12s %12s %9s\n", "task kind (per step)", "predicted",
                "measured", "error");
  out += line;
  for (const CompareRow& row : r.rows) {
    std::snprintf(line, sizeof line, "  %-28s %9.3f ms %9.3f ms %9s\n", row.task_kind.c_str(),
                  row.predicted_s * 1e3, row.measured_s * 1e3, error_text(row).c_str());
    out += line;
  }
  if (r.step_time_interval_s) {
    const double half = 0.5 * (r.step_time_interval_s->second - r.step_time_interval_s->first);
    out += "  step: " + sim::format_number("%.3f", r.step().predicted_s * 1e3) + " ± " +
           sim::format_number("%.3f", half * 1e3) + " ms (" +
           sim::format_number("%.0f", 100 * sim::kPredictionIntervalCoverage) + " % interval " +
           sim::format_number("%.3f", r.step_time_interval_s->first * 1e3) + " - " +
           sim::format_number("%.3f", r.step_time_interval_s->second * 1e3) + " ms): measured " +
           (r.step().measured_s >= r.step_time_interval_s->first &&
                    r.step().measured_s <= r.step_time_interval_s->second
                ? "inside"
                : "OUTSIDE") +
           "\n";
  }
  if (r.expert_load_factor) out += expert_load_text(*r.expert_load_factor) + "\n";
  return out;
}

std::string compare_markdown(const CompareReport& r) {
  std::string out = "# Predicted vs measured: " + r.model + " " + r.layout + "\n\n";
  out += "- device: " + r.device + "\n- profile: " + r.profile_name + " (" +
         std::string(sim::to_string(r.software)) + ")\n- sequence length: " +
         std::to_string(r.seq_length) + "\n- prediction: event simulator, same layout and profile\n";
  if (r.step_time_interval_s)
    out += "- " + sim::format_number("%.0f", 100 * sim::kPredictionIntervalCoverage) +
           " % interval of the step: " + sim::format_number("%.3f", r.step_time_interval_s->first * 1e3) +
           " - " + sim::format_number("%.3f", r.step_time_interval_s->second * 1e3) + " ms\n";
  if (r.expert_load_factor) out += "- " + expert_load_text(*r.expert_load_factor) + "\n";
  out += "\n| task kind (per step) | predicted ms | measured ms | error |\n|---|---:|---:|---:|\n";
  bool waits = false;
  for (const CompareRow& row : r.rows) {
    out += "| " + row.task_kind + " | " + sim::format_number("%.3f", row.predicted_s * 1e3) + " | " +
           sim::format_number("%.3f", row.measured_s * 1e3) + " | " + error_text(row) + " |\n";
    waits = waits || row.waits;
  }
  if (waits)
    out += "\n\"with wait\": a pipeline send is measured from the moment the stage reaches the exchange, so the "
           "wait for its peer (the bubble) is in it; the prediction is the transfer. The step compares the bubble.\n";
  return out;
}

std::string compare_csv(const CompareReport& r) {
  std::string out = "layout,task_kind,predicted_s,measured_s,error\n";
  for (const CompareRow& row : r.rows)
    if (!row.waits && row.measured_s > 0)  // what the calibration report can place
      out += "\"" + r.layout + "\"," + row.task_kind + "," + sim::format_number("%.9g", row.predicted_s) + "," +
             sim::format_number("%.9g", row.measured_s) + "," + sim::format_number("%.6f", row.error) + "\n";
  return out;
}

void write_compare_report(const CompareReport& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream out(path);
    if (!out || !(out << text))
      throw sim::ConfigError({{"--report", 0, 0, "", "cannot write '" + path + "'"}});
  };
  write("compare.md", compare_markdown(r));
  write("compare.csv", compare_csv(r));
  write("compare.json", compare_json(r).dump(2) + "\n");
  // The same points drawn by the reports library (`sextant report calibration`
  // reads this folder the same way): report.html with the predicted-vs-measured
  // scatter and the error per task kind, report.md, report.csv.
  reports::CalibrationReportOptions options;
  options.title = "Predicted against measured: " + r.model;
  options.source = "sextant run --compare (" + (std::filesystem::path(dir) / "compare.csv").string() + ")";
  reports::write_calibration_report(reports::load_calibration_points(dir), options, dir);
}

}  // namespace sextant::tools
