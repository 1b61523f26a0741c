// `sextant search` (alias `plan`): every valid layout, the best first, with why they win.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "search/complete_layout.h"
#include "search/explain_layout.h"
#include "search/layout_search.h"
#include "search/rescore_with_event.h"
#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"
#include "sim/compute/prediction_interval.h"
#include "tools/commands.h"
#include "tools/numeric_option.h"
#include "tools/planning_inputs.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

namespace {
struct SearchCommandOptions {
  PlanningArguments planning;
  long gpus = 0;
  std::string format = "table";
  int top = 5;
  bool explain = false;
  int max_tp = 0;
  bool tp_within_node = false;
  double memory_limit_gib = 0;
  double memory_headroom = 0.05;
  bool fp8 = false;
  int threads = 0;
  std::string engine = "analytic";
};

std::string short_layout(const sim::ParallelLayout& l) {
  std::string out = "tp=" + std::to_string(l.tp) + " pp=" + std::to_string(l.pp);
  if (l.vpp > 1) out += " vpp=" + std::to_string(l.vpp);
  if (l.custom_split()) out += " " + l.split_spec();
  out += " dp=" + std::to_string(l.dp);
  if (l.cp > 1) out += " cp=" + std::to_string(l.cp);
  if (l.ep > 1) out += " ep=" + std::to_string(l.ep);
  if (l.etp > 1) out += " etp=" + std::to_string(l.etp);
  out += " mbs=" + std::to_string(l.mbs);
  if (l.sp) out += " sp";
  out += " rc=" + std::string(sim::to_string(l.recompute));
  out += " zero=" + std::to_string(l.zero);
  if (l.zero >= 3) out += " " + std::string(sim::to_string(l.fsdp));
  if (l.precision != sim::Precision::kBf16) out += " " + std::string(sim::to_string(l.precision));
  std::string overlaps;
  if (l.overlap_grad_reduce) overlaps += "g";
  if (l.overlap_param_gather) overlaps += "p";
  if (l.tp_comm_overlap) overlaps += "t";
  if (l.moe_a2a_overlap) overlaps += "a";
  if (l.moe_shared_expert_overlap) overlaps += "s";
  if (!overlaps.empty()) out += " ovl=" + overlaps;
  return out;
}

// A progress bar on a terminal, for searches longer than a second; silent otherwise.
std::function<void(double)> progress_bar() {
  if (!isatty(STDERR_FILENO)) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start, shown = false](double fraction) mutable {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed < 1.0) return;
    const int width = 40;
    const int filled = static_cast<int>(fraction * width);
    std::fprintf(stderr, "\rsearching [%-*s] %3.0f %%", width, std::string(filled, '#').c_str(),
                 100 * fraction);
    shown = true;
    if (fraction >= 1.0 && shown) std::fprintf(stderr, "\r%*s\r", width + 24, "");
    std::fflush(stderr);
  };
}

// Options that contradict --layout or the hardware are refused, not resolved silently.
void check_search_conflicts(const SearchCommandOptions& o, const sim::ClusterConfig& cluster,
                            const sim::PartialLayout& partial) {
  std::vector<sim::Diagnostic> problems;
  if (o.max_tp > 0 && partial.tp && *partial.tp > o.max_tp) {
    problems.push_back({"--max-tp", 0, 0, "",
                        "is " + std::to_string(o.max_tp) + " but --layout fixes tp=" +
                            std::to_string(*partial.tp) + "; drop one of them"});
  }
  if (o.fp8 && cluster.gpu.peak_fp8_flops_per_s <= 0) {
    problems.push_back({"--fp8", 0, 0, "",
                        "the cluster's GPU " + cluster.gpu.name +
                            " has no FP8 tensor cores (its preset gives no peak_flops_per_s.fp8); "
                            "FP8 needs Hopper or Blackwell GPUs"});
  }
  if (o.fp8 && partial.precision && *partial.precision != sim::Precision::kFp8) {
    problems.push_back({"--fp8", 0, 0, "",
                        std::string("asks to consider FP8 but --layout fixes precision=") +
                            std::string(sim::to_string(*partial.precision)) +
                            "; drop one of them"});
  }
  if (!problems.empty()) throw sim::ConfigError(std::move(problems));
}

int run_search(const SearchCommandOptions& o, const CommonOptions& common, std::ostream& out) {
  const PlanningInputs in = load_planning_inputs(common.configs_dir, o.planning);
  const sim::ModelConfig& model = in.model;
  const sim::ClusterConfig& cluster = in.cluster;
  const sim::CostProfile& profile = in.profile;
  const sim::PartialLayout& partial = in.layout;
  check_gpu_count(o.gpus, cluster);
  check_search_conflicts(o, cluster, partial);
  search::SearchConstraints constraints;
  if (o.max_tp > 0) constraints.max_tp = o.max_tp;
  constraints.tp_within_node = o.tp_within_node;
  if (o.memory_limit_gib > 0) {
    const double limit = o.memory_limit_gib * 1024.0 * 1024 * 1024;
    if (limit > static_cast<double>(cluster.gpu.memory_bytes)) {
      throw sim::ConfigError({{"--memory-limit-gib", 0, 0, "",
                               "must not exceed the GPU's memory (" +
                                   format_gib(static_cast<double>(cluster.gpu.memory_bytes)) + ")"}});
    }
    constraints.memory_limit_bytes = limit;
  }
  constraints.memory_headroom = o.memory_headroom;
  constraints.allow_fp8 = o.fp8;

  if (o.explain) {
    const search::Explanation e =
        search::explain_layout(model, cluster, profile, o.gpus, partial, constraints);
    // An invalid layout is bad input here as in `simulate`: exit code 2.
    if (!e.valid) throw sim::ConfigError(e.reasons);
    if (o.format == "json") {
      out << nlohmann::json{{"valid", e.valid}, {"fits", e.fits}, {"layout", e.layout},
                            {"explanation", e.lines}}
                 .dump(2)
          << "\n";
    } else {
      if (!e.layout.empty()) out << "layout: " << e.layout << "\n";
      for (const std::string& line : e.lines) out << line << "\n";
    }
    return 0;
  }

  // The event engine re-scores the analytical search's best candidates (at least 8).
  const bool event = o.engine == "event";
  search::SearchOptions options;
  options.constraints = constraints;
  options.top = event ? std::max(o.top, search::kEventCandidates) : o.top;
  options.keep_all = o.format == "csv";
  options.threads = o.threads;
  if (o.format == "table") options.progress = progress_bar();
  search::SearchResult result =
      search::search_layouts(model, cluster, profile, o.gpus, partial, options);
  if (event) search::rescore_with_event(result.best, model, cluster, profile, o.top);
  if (result.best.empty()) {
    throw sim::ConfigError(
        search::explain_empty_search(model, cluster, o.gpus, partial, result, constraints));
  }
  const SimulationContext context = simulation_context(in, o.planning, o.gpus, o.engine);
  if (o.format == "json") {
    nlohmann::json results = nlohmann::json::array();
    for (const sim::SimulationResult& r : result.best) {
      nlohmann::json j = simulation_json(context, r);
      j["limited_by"] = search::describe_limiter(r, cluster, result.memory_limit_bytes);
      results.push_back(j);
    }
    out << nlohmann::json{{"evaluated", result.evaluated},
                          {"valid", result.valid},
                          {"feasible", result.feasible},
                          {"search_time_s", result.search_time_s},
                          {"profile", profile_json(profile)},
                          {"results", results}}
               .dump(2)
        << "\n";
    return 0;
  }
  if (o.format == "csv") {
    out << simulation_csv_header();
    for (const sim::SimulationResult& r : result.all) out << simulation_csv_row(context, r);
    return 0;
  }
  char line[1024];
  out << "sextant search: " << model.name << " on " << o.gpus << " x " << cluster.gpu.name << " ("
      << cluster.name << "), global batch " << *partial.gbs << ", seq " << model.seq_length
      << "\nprofile: " << profile_label(profile);
  if (const auto unit = sim::step_time_interval_s(1.0, profile)) {
    std::snprintf(line, sizeof line, "; step times %+.1f %% / %+.1f %% (%.0f %% interval of its fit)",
                  100 * (unit->first - 1), 100 * (unit->second - 1),
                  100 * sim::kPredictionIntervalCoverage);
    out << line;
  }
  out << "\n\n";
  // The layout column is as wide as its longest entry, so the columns after it line up.
  int width = 6;
  for (const sim::SimulationResult& r : result.best) {
    width = std::max(width, static_cast<int>(short_layout(r.layout).size()));
  }
  std::snprintf(line, sizeof line, "%3s  %-*s %9s %9s %6s %10s %9s  %s\n", "#", width, "layout",
                "step", "tok/s/GPU", "MFU", "mem/GPU", "headroom", "limited by");
  out << line;
  int rank = 1;
  for (const sim::SimulationResult& r : result.best) {
    const double headroom = 1.0 - r.memory.total() / static_cast<double>(cluster.gpu.memory_bytes);
    std::snprintf(line, sizeof line, "%3d  %-*s %9s %9.0f %5.1f%% %10s %8.1f%%  %s\n", rank++,
                  width, short_layout(r.layout).c_str(), format_seconds(r.step_time_s).c_str(),
                  r.tokens_per_s_per_gpu, 100 * reported_mfu(context, r),
                  format_gib(r.memory.total()).c_str(), 100 * headroom,
                  search::describe_limiter(r, cluster, result.memory_limit_bytes).c_str());
    out << line;
  }
  out << "\n" << search_table_legend(context.mfu_convention);
  std::snprintf(line, sizeof line,
                "\nConsidered %ld layouts: %ld valid, %ld fit in memory (limit %s per GPU after "
                "%.0f %% headroom).\nSearched in %.3f s (%.0f layouts/s). Best layout in full:\n  %s\n",
                result.evaluated, result.valid, result.feasible,
                format_gib(result.memory_limit_bytes).c_str(), 100 * o.memory_headroom,
                result.search_time_s, result.evaluated / std::max(result.search_time_s, 1e-9),
                result.best.front().layout.to_spec().c_str());
  out << line;
  return 0;
}
}  // namespace

CommandRunner add_search_command(CLI::App& app, const CommonOptions& common) {
  auto o = std::make_shared<SearchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "Find the fastest parallel layouts for a model, cluster, GPU count and global batch.\n"
      "Every combination of tp, sp, cp, ep/etp, pp, vpp, dp, micro-batch, recompute, ZeRO\n"
      "stage, schedule and overlap options is checked, pruned by memory and scored with the\n"
      "analytical model. Knobs fixed in --layout are kept.\n\n"
      "Examples:\n"
      "  sextant search --model llama3-70b --cluster dgx-h100 --gpus 512 --global-batch 1024\n"
      "  sextant search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --layout tp=8,gbs=1536\n"
      "  sextant search --model gpt3-175b --cluster dgx-a100 --gpus 64 --global-batch 64 \\\n"
      "      --explain --layout tp=8,pp=1,mbs=1");
  cmd->alias("plan");
  add_planning_options(*cmd, o->planning, true);
  add_whole_number_option(*cmd, "--gpus", o->gpus, "number of GPUs", 1, kMostGpus)->required();
  add_whole_number_option(*cmd, "--top", o->top, "how many layouts to print", 1, 1000)
      ->capture_default_str();
  cmd->add_flag("--explain", o->explain,
                "explain the (completed) --layout: why it is invalid or does not fit, or what "
                "limits it");
  add_whole_number_option(*cmd, "--max-tp", o->max_tp, "largest tensor-parallel size to consider",
                          1, kMostGpus);
  cmd->add_flag("--tp-within-node", o->tp_within_node, "keep each TP group inside one node");
  add_number_option(*cmd, "--memory-limit-gib", o->memory_limit_gib,
                    "memory per GPU to plan for, below the GPU's (GiB)", 0.001, 1e6);
  add_number_option(*cmd, "--memory-headroom", o->memory_headroom,
                    "fraction of the memory kept free (context, workspaces, fragmentation)", 0.0,
                    0.9)
      ->capture_default_str();
  cmd->add_flag("--fp8", o->fp8, "also consider FP8 GEMMs (Hopper)");
  cmd->add_option("--engine", o->engine,
                  "analytic, or event: re-score the best (at least 8) on the event-driven simulator")
      ->check(CLI::IsMember({"analytic", "event"}))
      ->capture_default_str();
  add_whole_number_option(*cmd, "--threads", o->threads, "worker threads (default 0: all cores)",
                          0, 4096);
  cmd->add_option("--format", o->format,
                  "table (the best --top), json (DESIGN.md shape), csv (every valid layout, with fits_memory)")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  return [o, &common](std::ostream& out) { return run_search(*o, common, out); };
}

}  // namespace sextant::tools
