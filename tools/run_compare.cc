#include "tools/run_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "reports/calibration_report.h"
#include "sim/compute/prediction_interval.h"
#include "sim/compute/stage_rates.h"
#include "sim/core/config_error.h"
#include "sim/event/event_simulation.h"
#include "sim/plan/task_name.h"

namespace sextant::tools {

namespace {

constexpr const char* kStepRow = "step";

std::string number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string error_text(const CompareRow& r) {
  if (r.waits) return "with wait";
  return r.measured_s > 0 ? number("%+.1f %%", 100 * r.error) : "-";
}

}  // namespace

std::string compare_layout_text(const sim::ParallelLayout& l) {
  std::string out;
  auto add = [&](const char* knob, int value) {
    if (value > 1) out += std::string(knob) + "=" + std::to_string(value) + ",";
  };
  add("tp", l.tp);
  if (l.tp > 1 && l.sp) out += "sp=1,";
  add("cp", l.cp);
  add("ep", l.ep);
  add("pp", l.pp);
  add("vpp", l.vpp);
  if (l.pp > 1 && l.custom_split()) out += l.split_spec() + ",";
  add("dp", l.dp);
  if (l.dp > 1 && l.zero > 0) out += "zero=" + std::to_string(l.zero) + ",";
  if (l.dp > 1 && l.zero > 0 && l.overlap_param_gather) out += "overlap_param_gather=1,";
  if (l.tp_comm_overlap) out += "tp_comm_overlap=1,";
  return out + "mbs=" + std::to_string(l.mbs) + ",gbs=" + std::to_string(l.gbs) +
         ",recompute=" + std::string(sim::to_string(l.recompute));
}

std::string task_kind(std::string_view name) {
  auto drop_part = [&name](std::string_view label) {
    if (name.starts_with(label)) {
      const std::size_t dot = name.find('.');
      name.remove_prefix(dot == std::string_view::npos ? name.size() : dot + 1);
    }
  };
  drop_part("stage");
  drop_part("mb");
  std::string kind;
  if (name.starts_with("layer")) {
    kind = "layer*";
    name.remove_prefix(std::min(name.find('.'), name.size()));
  }
  // A data-parallel bucket's collectives: one kind for all of them
  // ("dp.all_gather.bucket*", "dp.all_gather.bucket*.fwd" under FSDP).
  if (const std::size_t bucket = name.rfind(".bucket"); bucket != std::string_view::npos) {
    std::size_t digits = bucket + std::string_view(".bucket").size();
    const std::size_t begin = digits;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    if (digits > begin) {
      kind += name.substr(0, begin);
      kind += '*';
      name.remove_prefix(digits);
    }
  }
  kind += name;
  return kind;
}

ComparePrediction predict_for_compare(const sim::ModelConfig& model,
                                      const sim::ClusterConfig& cluster,
                                      const sim::CostProfile& profile,
                                      const sim::ParallelLayout& layout) {
  sim::EventOptions options;
  options.critical_path = false;
  ComparePrediction p;
  p.step_time_s = sim::simulate_event(model, cluster, profile, layout, options).result.step_time_s;
  p.step_time_interval_s = sim::step_time_interval_s(p.step_time_s, profile);
  // The tasks are measured with their kernels launched one by one (CUDA events
  // cannot time inside a graph replay): predict them so (sim/compute/stage_rates.h).
  options.conditions = sim::task_timing_conditions(profile, layout);
  const sim::EventSimulation e = sim::simulate_event(model, cluster, profile, layout, options);
  for (std::uint32_t i = e.plan.stage_begin[0]; i < e.plan.stage_begin[1]; ++i)
    p.task_seconds_per_step[task_kind(sim::task_name(e.plan, e.plan.tasks[i]))] +=
        e.costs[i].duration_s;
  p.stage_compute_s.assign(static_cast<std::size_t>(e.plan.num_stages()), 0.0);
  for (int s = 0; s < e.plan.num_stages(); ++s)
    for (std::uint32_t i = e.plan.stage_begin[static_cast<std::size_t>(s)];
         i < e.plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++i) {
      const sim::Task& t = e.plan.tasks[i];
      if (t.kind != sim::TaskKind::kCompute) continue;  // recomputation is a compute task too (Pass::kRecompute)
      p.stage_compute_s[static_cast<std::size_t>(s)] += e.costs[i].duration_s;
      p.compute_kinds.insert(task_kind(sim::task_name(e.plan, t)));
    }
  return p;
}

double measured_compute_s(const ComparePrediction& predicted, const std::map<std::string, double>& measured) {
  double sum = 0;
  for (const auto& [kind, seconds] : measured)
    if (predicted.compute_kinds.count(kind) != 0) sum += seconds;
  return sum;
}

bool measurement_includes_wait(std::string_view task_kind, bool pipeline) {
  return task_kind.find("pp.send_") != std::string_view::npos || (pipeline && task_kind == "optimizer.step");
}

CompareReport make_compare_report(const ComparePrediction& predicted, double measured_step_s,
                                  const std::map<std::string, double>& measured,
                                  std::span<const double> measured_stage_compute_s) {
  CompareReport r;
  r.step_time_interval_s = predicted.step_time_interval_s;
  const bool pipeline = predicted.stage_compute_s.size() > 1;
  auto row = [pipeline](const std::string& kind, double p, double m) {
    const bool waits = measurement_includes_wait(kind, pipeline);
    return CompareRow{kind, p, m, m > 0 && !waits ? (p - m) / m : 0.0, waits};
  };
  r.rows.push_back(row(kStepRow, predicted.step_time_s, measured_step_s));
  if (predicted.stage_compute_s.size() > 1 && measured_stage_compute_s.size() == predicted.stage_compute_s.size())
    for (std::size_t s = 0; s < measured_stage_compute_s.size(); ++s)
      r.rows.push_back(row("stage" + std::to_string(s) + ".compute", predicted.stage_compute_s[s],
                           measured_stage_compute_s[s]));
  std::set<std::string> kinds;
  for (const auto& [kind, s] : predicted.task_seconds_per_step) kinds.insert(kind);
  for (const auto& [kind, s] : measured) kinds.insert(kind);
  std::vector<CompareRow> tasks;
  for (const std::string& kind : kinds) {
    const auto p = predicted.task_seconds_per_step.find(kind);
    const auto m = measured.find(kind);
    tasks.push_back(row(kind, p == predicted.task_seconds_per_step.end() ? 0.0 : p->second,
                        m == measured.end() ? 0.0 : m->second));
  }
  std::stable_sort(tasks.begin(), tasks.end(), [](const CompareRow& a, const CompareRow& b) {
    return std::max(a.measured_s, a.predicted_s) > std::max(b.measured_s, b.predicted_s);
  });
  r.rows.insert(r.rows.end(), tasks.begin(), tasks.end());
  return r;
}

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
    r.rows.push_back({kStepRow, j.at("predicted_step_time_s").get<double>(),
                      j.at("measured_step_time_s").get<double>(), 0});
    if (j.contains("step_time_error")) r.rows.back().error = j.at("step_time_error").get<double>();
    if (r.rows.back().measured_s <= 0) fail("measured_step_time_s", "must be positive");
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
    out += "  step: " + number("%.3f", r.step().predicted_s * 1e3) + " ± " +
           number("%.3f", half * 1e3) + " ms (" +
           number("%.0f", 100 * sim::kPredictionIntervalCoverage) + " % interval " +
           number("%.3f", r.step_time_interval_s->first * 1e3) + " - " +
           number("%.3f", r.step_time_interval_s->second * 1e3) + " ms): measured " +
           (r.step().measured_s >= r.step_time_interval_s->first &&
                    r.step().measured_s <= r.step_time_interval_s->second
                ? "inside"
                : "OUTSIDE") +
           "\n";
  }
  return out;
}

std::string compare_markdown(const CompareReport& r) {
  std::string out = "# Predicted vs measured: " + r.model + " " + r.layout + "\n\n";
  out += "- device: " + r.device + "\n- profile: " + r.profile_name + " (" +
         std::string(sim::to_string(r.software)) + ")\n- sequence length: " +
         std::to_string(r.seq_length) + "\n- prediction: event simulator, same layout and profile\n";
  if (r.step_time_interval_s)
    out += "- " + number("%.0f", 100 * sim::kPredictionIntervalCoverage) +
           " % interval of the step: " + number("%.3f", r.step_time_interval_s->first * 1e3) +
           " - " + number("%.3f", r.step_time_interval_s->second * 1e3) + " ms\n";
  out += "\n| task kind (per step) | predicted ms | measured ms | error |\n|---|---:|---:|---:|\n";
  bool waits = false;
  for (const CompareRow& row : r.rows) {
    out += "| " + row.task_kind + " | " + number("%.3f", row.predicted_s * 1e3) + " | " +
           number("%.3f", row.measured_s * 1e3) + " | " + error_text(row) + " |\n";
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
      out += "\"" + r.layout + "\"," + row.task_kind + "," + number("%.9g", row.predicted_s) + "," +
             number("%.9g", row.measured_s) + "," + number("%.6f", row.error) + "\n";
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
