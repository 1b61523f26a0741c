// `sextant search` (alias `plan`): every valid layout, the best first, with why they win.
#include <algorithm>
#include <iostream>
#include <memory>

#include "search/complete_layout.h"
#include "search/cross_node_tp.h"
#include "search/explain_layout.h"
#include "search/grounded_layout.h"
#include "search/mechanism_evidence.h"
#include "search/layout_search.h"
#include "search/rescore_with_event.h"
#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"
#include "tools/commands.h"
#include "tools/grounding_output.h"
#include "tools/numeric_option.h"
#include "tools/planning_inputs.h"
#include "tools/search_output.h"
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
  bool tp_within_node = true;  // practitioners' default; --tp-across-nodes lifts it
  double memory_limit_gib = 0;
  double memory_headroom = 0.05;
  bool fp8 = false;
  int threads = 0;
  std::string engine = "analytic";
};

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
      nlohmann::json j{{"valid", e.valid}, {"fits", e.fits}, {"layout", e.layout},
                       {"explanation", e.lines}, {"ungrounded", e.ungrounded}};
      if (e.grounded_runner_up) {
        const SimulationContext context = simulation_context(in, o.planning, o.gpus, o.engine);
        j["grounded_runner_up"] = simulation_json(context, *e.grounded_runner_up);
      }
      out << j.dump(2) << "\n";
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
  const SearchOutput output{model, cluster, profile, o.gpus, *partial.gbs, o.memory_headroom, context};
  // What keeping tp inside a node cost, when a TP group across nodes would win.
  std::optional<sim::SimulationResult> across;
  // (Analytic times on both sides: not beside the event engine's re-scored ones.)
  if (constraints.tp_within_node && o.format != "csv" && !event)
    across = search::faster_cross_node_tp(model, cluster, profile, o.gpus, partial, options, result.best.front());
  // A best layout resting on a mechanism without evidence is shown beside the
  // fastest one with evidence for every mechanism, timed by the same engine.
  std::optional<search::GroundedAlternative> grounded;
  if (o.format != "csv" && !search::ungrounded_names(result.best.front().layout).empty()) {
    grounded = search::fastest_grounded_layout(model, cluster, profile, o.gpus, partial, options);
    if (event && grounded->best) {
      std::vector<sim::SimulationResult> one{*grounded->best};
      search::rescore_with_event(one, model, cluster, profile, 1);
      grounded->best = one.front();
    }
  }
  if (o.format == "json") {
    nlohmann::json j = search_json(output, result);
    if (across) j["tp_across_nodes"] = simulation_json(context, *across);
    if (grounded) add_grounding_json(j, context, cluster, result, *grounded);
    out << j.dump(2) << "\n";
  } else if (o.format == "csv") {
    out << simulation_csv_header();
    for (const sim::SimulationResult& r : result.all) out << simulation_csv_row(context, r);
  } else {
    out << search_table(output, result);
    if (across) out << cross_node_tp_note(cluster, result.best.front(), *across);
    out << grounding_note(context, cluster, result, grounded);
  }
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
      "analytical model. Knobs fixed in --layout are kept. Rows that rest on a mechanism\n"
      "with no dev case and no engine measurement (ZeRO-2/3, ep > 1, ...) are named under the\n"
      "table, beside the fastest layout with evidence for every mechanism.\n\n"
      "Examples:\n"
      "  sextant search --model llama3-70b --cluster dgx-h100 --gpus 512 --global-batch 1024\n"
      "  sextant search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --layout tp=8,gbs=1536\n"
      "  sextant search --model gpt3-175b --cluster dgx-a100 --gpus 64 --global-batch 64 \\\n"
      "      --explain --layout tp=8,pp=1,mbs=1");
  cmd->alias("plan");
  add_planning_options(*cmd, o->planning);
  add_whole_number_option(*cmd, "--gpus", o->gpus, "number of GPUs", 1, kMostGpus)->required();
  add_whole_number_option(*cmd, "--top", o->top, "how many layouts to print", 1, 1000)
      ->capture_default_str();
  cmd->add_flag("--explain", o->explain,
                "explain the (completed) --layout: why it is invalid or does not fit, or what "
                "limits it (and, resting on an ungrounded mechanism, the fastest grounded layout)");
  add_whole_number_option(*cmd, "--max-tp", o->max_tp, "largest tensor-parallel size to consider",
                          1, kMostGpus);
  cmd->add_flag("--tp-within-node", o->tp_within_node,
                "keep each TP group inside one node, one NVLink domain (the default; the table notes\n"
                "when a TP group across nodes would be faster)");
  cmd->add_flag("!--tp-across-nodes", o->tp_within_node,
                "also consider TP groups spanning nodes (their all-reduces cross the network)");
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
