// `sextant validate`: predicted against measured step time for published runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "reports/validation_groups.h"
#include "reports/validation_report.h"
#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"
#include "tools/commands.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

namespace {
struct ValidateOptions {
  std::string cases;
  std::string profile;
  std::string format = "table";
  std::string engine = "analytic";
};

std::string fixed(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// The profile each case was predicted with ("" when its cluster is unknown).
std::vector<std::optional<sim::CostProfile>> case_profiles(const reports::ValidationSummary& s,
                                                           const sim::PresetCatalog& catalog,
                                                           const std::string& profile_path) {
  std::vector<std::optional<sim::CostProfile>> out;
  for (const reports::CaseOutcome& o : s.outcomes) {
    try {
      out.push_back(catalog.profile(profile_path, catalog.cluster(o.input.cluster_preset).gpu.name));
    } catch (const sim::ConfigError&) {
      out.emplace_back();  // the case's own failure says why
    }
  }
  return out;
}

void print_table(const reports::ValidationSummary& s,
                 const std::vector<std::optional<sim::CostProfile>>& profiles, std::ostream& out) {
  char row[512];
  // The case column is as wide as the longest id, so the numbers after it line up.
  int width = 4;
  for (const reports::CaseOutcome& o : s.outcomes) {
    width = std::max(width, static_cast<int>(o.input.id.size()));
  }
  std::snprintf(row, sizeof row, "%-*s %5s %10s %10s %8s  %s\n", width, "case", "gpus", "measured",
                "predicted", "error", "completed layout");
  out << row;
  for (const reports::CaseOutcome& o : s.outcomes) {
    if (!o.predicted) {
      std::snprintf(row, sizeof row, "%-*s %5ld %10.3f %10s %8s  %s\n", width, o.input.id.c_str(),
                    o.input.num_gpus, o.input.measured_step_time_s, "-", "-", o.failure.c_str());
    } else {
      const sim::ParallelLayout& l = o.predicted->layout;
      const std::string layout =
          "tp=" + std::to_string(l.tp) + " pp=" + std::to_string(l.pp) +
          " vpp=" + std::to_string(l.vpp) + (l.custom_split() ? " " + l.split_spec() : "") +
          " dp=" + std::to_string(l.dp) +
          " mbs=" + std::to_string(l.mbs) + " sp=" + std::to_string(l.sp) + " rc=" +
          std::string(sim::to_string(l.recompute)) + " zero=" + std::to_string(l.zero) + " " +
          std::string(sim::to_string(l.attention));
      std::snprintf(row, sizeof row, "%-*s %5ld %10.3f %10.3f %+7.1f%%  %s\n", width,
                    o.input.id.c_str(), o.input.num_gpus, o.input.measured_step_time_s,
                    o.predicted->step_time_s, 100.0 * o.relative_error, layout.c_str());
    }
    out << row;
  }
  out << "\n" << s.predicted << " of " << s.outcomes.size() << " cases predicted. |step-time error|: median "
      << fixed("%.1f%%", 100 * s.median_abs_error) << ", p90 " << fixed("%.1f%%", 100 * s.p90_abs_error)
      << ", worst " << fixed("%.1f%%", 100 * s.worst_abs_error) << " (" << s.worst_case_id << ")\n";
  std::set<std::string> labels;
  for (const auto& p : profiles)
    if (p) labels.insert(profile_label(*p));
  out << "profiles:";
  for (const std::string& label : labels) out << " " << label;
  out << "\n";
  out << "\nby group of cases (|step-time error|):\n";
  std::snprintf(row, sizeof row, "  %-10s %-46s %9s %7s %7s %7s\n", "group", "", "predicted",
                "median", "p90", "worst");
  out << row;
  for (const reports::GroupSummary& g : reports::summarize_by_group(s)) {
    const std::string count = std::to_string(g.predicted) + "/" + std::to_string(g.cases);
    const std::string name = g.name.size() > 46 ? g.name.substr(0, 43) + "..." : g.name;
    if (g.predicted == 0) {
      std::snprintf(row, sizeof row, "  %-10s %-46s %9s %7s %7s %7s\n", g.dimension.c_str(),
                    name.c_str(), count.c_str(), "-", "-", "-");
    } else {
      std::snprintf(row, sizeof row, "  %-10s %-46s %9s %6.1f%% %6.1f%% %6.1f%%\n",
                    g.dimension.c_str(), name.c_str(), count.c_str(), 100 * g.median_abs_error,
                    100 * g.p90_abs_error, 100 * g.worst_abs_error);
    }
    out << row;
  }
}

// The summary as a Markdown table: every group, the whole set first. README.md
// embeds this output verbatim (tests/tools/readme_figures_test.cc checks it).
void print_markdown(const reports::ValidationSummary& s, std::ostream& out) {
  const auto percent = [](double e) { return fixed("%.1f %%", 100 * e); };
  out << "| group | predicted | median | p90 | worst |\n|---|---:|---:|---:|---:|\n";
  out << "| all | " << s.predicted << "/" << s.outcomes.size() << " | "
      << percent(s.median_abs_error) << " | " << percent(s.p90_abs_error) << " | "
      << percent(s.worst_abs_error) << " (" << s.worst_case_id << ") |\n";
  for (const reports::GroupSummary& g : reports::summarize_by_group(s)) {
    out << "| " << g.dimension << ": " << g.name << " | " << g.predicted << "/" << g.cases << " | ";
    if (g.predicted == 0) {
      out << "- | - | - |\n";
    } else {
      out << percent(g.median_abs_error) << " | " << percent(g.p90_abs_error) << " | "
          << percent(g.worst_abs_error) << " |\n";
    }
  }
}

nlohmann::json summary_json(const reports::ValidationSummary& s,
                            const std::vector<std::optional<sim::CostProfile>>& profiles) {
  nlohmann::json cases = nlohmann::json::array();
  for (std::size_t i = 0; i < s.outcomes.size(); ++i) {
    const reports::CaseOutcome& o = s.outcomes[i];
    nlohmann::json c = {{"id", o.input.id},
                        {"gpus", o.input.num_gpus},
                        {"measured_step_time_s", o.input.measured_step_time_s}};
    if (profiles[i]) c["profile"] = profile_json(*profiles[i]);
    if (o.predicted) {
      c["predicted_step_time_s"] = o.predicted->step_time_s;
      c["relative_error"] = o.relative_error;
      c["layout"] = layout_json(o.predicted->layout);
      c["mfu"] = o.predicted->mfu;
    } else {
      c["failure"] = o.failure;
    }
    cases.push_back(c);
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const reports::GroupSummary& g : reports::summarize_by_group(s)) {
    groups.push_back({{"dimension", g.dimension},
                      {"name", g.name},
                      {"cases", g.cases},
                      {"predicted", g.predicted},
                      {"median_abs_error", g.median_abs_error},
                      {"p90_abs_error", g.p90_abs_error},
                      {"worst_abs_error", g.worst_abs_error}});
  }
  return {{"cases", cases},
          {"groups", groups},
          {"predicted", s.predicted},
          {"median_abs_error", s.median_abs_error},
          {"p90_abs_error", s.p90_abs_error},
          {"worst_abs_error", s.worst_abs_error},
          {"worst_case", s.worst_case_id}};
}

int run_validate(const ValidateOptions& o, const CommonOptions& common, std::ostream& out) {
  const sim::PresetCatalog catalog(common.configs_dir);
  const std::vector<reports::ValidationCase> cases = reports::load_validation_cases(o.cases);
  sim::EventOptions event_options;
  event_options.critical_path = false;  // only the step time is compared
  const reports::ValidationSummary summary = reports::run_validation(
      cases, catalog, o.profile,
      o.engine == "event" ? reports::PredictionEngine::kEvent : reports::PredictionEngine::kAnalytic,
      event_options);
  const auto profiles = case_profiles(summary, catalog, o.profile);
  if (o.format == "json") {
    out << summary_json(summary, profiles).dump(2) << "\n";
  } else if (o.format == "markdown") {
    print_markdown(summary, out);
  } else {
    print_table(summary, profiles, out);
  }
  return summary.predicted == static_cast<int>(summary.outcomes.size()) ? 0 : 1;
}
}  // namespace

CommandRunner add_validate_command(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Compare predicted with measured step times of published runs.\n"
      "Knobs a case leaves null (micro-batch, virtual stages, recompute, ...) are chosen\n"
      "as the fastest completion that fits in memory. Prints per case the error, then the\n"
      "median, p90 and worst |error|. Exit code 1 if a case could not be predicted.\n\n"
      "Example:\n"
      "  sextant validate --cases validation/dev_cases.yaml");
  cmd->add_option("--cases", options->cases,
                  "cases file in the format of validation/dev_cases.yaml")
      ->required();
  cmd->add_option("--profile", options->profile,
                  "cost profile YAML for every case (default: each GPU's own profile)");
  cmd->add_option("--format", options->format,
                  "output format: table (per case, then by group), json, or markdown (the\n"
                  "errors by group as one Markdown table, as README.md shows them)")
      ->check(CLI::IsMember({"table", "json", "markdown"}))
      ->capture_default_str();
  cmd->add_option("--engine", options->engine,
                  "engine predicting each completed layout: analytic (closed form) or event\n"
                  "(the iteration played on the discrete-event simulator); the layouts are\n"
                  "completed by the analytic search either way")
      ->check(CLI::IsMember({"analytic", "event"}))
      ->capture_default_str();
  return [options, &common](std::ostream& out) { return run_validate(*options, common, out); };
}

}  // namespace sextant::tools
