// `sextant simulate`: one layout (or the best completion of a partial one).
#include <fstream>
#include <memory>
#include <optional>

#include "search/rescore_with_event.h"
#include "search/complete_layout.h"
#include "sim/analytic/analytic_model.h"
#include "sim/core/config_error.h"
#include "sim/core/layout_check.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/preset_catalog.h"
#include "sim/event/chrome_trace.h"
#include "sim/event/event_simulation.h"
#include "tools/commands.h"
#include "tools/numeric_option.h"
#include "tools/planning_inputs.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

namespace {
struct SimulateOptions {
  PlanningArguments planning;
  long gpus = 0;
  std::string format = "table";
  std::string engine = "analytic";
  std::string trace;  // Chrome trace file (event engine)
  double memory_headroom = 0.05;
};

int run_simulate(const SimulateOptions& o, const CommonOptions& common, std::ostream& out) {
  const PlanningInputs in = load_planning_inputs(common.configs_dir, o.planning);
  const sim::ModelConfig& model = in.model;
  const sim::ClusterConfig& cluster = in.cluster;
  const sim::CostProfile& profile = in.profile;
  const sim::PartialLayout& partial = in.layout;
  long gpus = o.gpus;
  if (gpus == 0) {
    if (partial.tp && partial.pp && partial.dp) {
      gpus = static_cast<long>(*partial.tp) * *partial.pp * *partial.dp * partial.cp.value_or(1);
    } else {
      throw sim::ConfigError({{"--gpus", 0, 0, "",
                               "the GPU count is needed: give --gpus N, or tp, pp and dp in --layout"}});
    }
  }
  check_gpu_count(gpus, cluster);
  if (!o.trace.empty() && o.engine != "event") {
    throw sim::ConfigError({{"--trace", 0, 0, "", "needs --engine event (the analytic engine has no timeline)"}});
  }

  search::SearchConstraints constraints;
  constraints.memory_headroom = o.memory_headroom;
  const search::Completion completion =
      search::complete_layout(model, cluster, profile, gpus, partial, constraints);
  sim::SimulationResult result;
  if (completion.best) {
    result = *completion.best;
  } else {
    // Nothing fits: if the layout was given in full and is valid, still show it
    // (fits_memory says it does not fit); otherwise report why.
    bool complete = partial.tp && partial.pp && partial.dp && partial.mbs;
    if (!complete || completion.valid == 0) throw sim::ConfigError(completion.reasons);
    const search::Completion any =
        search::complete_layout(model, cluster, profile, gpus, partial, constraints, false);
    if (!any.best) throw sim::ConfigError(completion.reasons);
    result = *any.best;
  }

  // The event engine replays the analytical search's best candidates and keeps
  // the fastest (or plays the given layout when nothing fits).
  std::optional<sim::EventSimulation> event;
  if (o.engine == "event") {
    if (completion.best) {
      event = search::complete_with_event(model, cluster, profile, gpus, partial, constraints);
    }
    if (!event) event = sim::simulate_event(model, cluster, profile, result.layout);
    result = event->result;
    if (!o.trace.empty()) {
      std::ofstream file(o.trace);
      if (!file) throw sim::ConfigError({{"--trace", 0, 0, "", "cannot write '" + o.trace + "'"}});
      sim::write_chrome_trace(file, event->plan, event->timeline, event->costs,
                              event->critical_path,
                              model.name + " on " + std::to_string(gpus) + " x " +
                                  cluster.gpu.name + ", " + result.layout.to_spec());
      if (!file) throw sim::ConfigError({{"--trace", 0, 0, "", "writing '" + o.trace + "' failed"}});
    }
  }

  SimulationContext context = simulation_context(in, o.planning, gpus, o.engine);
  if (const sim::PipelineSplit split = sim::pipeline_split(in.model, result.layout); !split.even()) {
    context.pipeline_split = split.describe();
  }
  if (o.format == "json") {
    nlohmann::json j = simulation_json(context, result);
    if (event) j["event"] = event_json(*event, o.trace);
    out << j.dump(2) << "\n";
  } else if (o.format == "csv") {
    out << simulation_csv_header() << simulation_csv_row(context, result);
  } else {
    out << simulation_table(context, result);
    if (event) out << event_table(*event, o.trace);
    if (completion.evaluated > 1) {
      out << "\nKnobs left out of --layout were chosen by trying " << completion.evaluated
          << " completions (" << completion.valid << " valid, " << completion.fitting
          << " fitting in memory with " << static_cast<int>(o.memory_headroom * 100)
          << "% headroom) and keeping the fastest"
          << (event ? "; the event engine replayed the best " +
                          std::to_string(search::kEventCandidates) + " of them.\n"
                    : ".\n");
    }
  }
  return 0;
}
}  // namespace

CommandRunner add_simulate_command(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Predict step time, memory per GPU and MFU of one parallel layout.\n"
      "Knobs left out of --layout are chosen by trying their options and keeping the\n"
      "fastest layout that fits in memory.\n\n"
      "Example:\n"
      "  sextant simulate --model gpt3-175b --cluster dgx-a100 --gpus 1536 \\\n"
      "      --layout tp=8,pp=16,dp=12,mbs=1,gbs=1536,recompute=selective,sp=1");
  add_planning_options(*cmd, options->planning);
  add_whole_number_option(*cmd, "--gpus", options->gpus,
                          "number of GPUs (default: tp*cp*pp*dp when all are in --layout)", 1,
                          kMostGpus);
  cmd->add_option("--format", options->format, "output format")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  cmd->add_option("--engine", options->engine,
                  "analytic (closed form, microseconds) or event (plays the whole iteration's\n"
                  "tasks on a discrete-event engine: schedule, overlap, timeline). Knobs left out\n"
                  "of --layout are chosen by the analytic search either way.")
      ->check(CLI::IsMember({"analytic", "event"}))
      ->capture_default_str();
  cmd->add_option("--trace", options->trace,
                  "with --engine event: write the timeline as a Chrome/Perfetto trace to FILE\n"
                  "(one process per pipeline stage, one track per stream)");
  add_number_option(*cmd, "--memory-headroom", options->memory_headroom,
                    "fraction of GPU memory kept free when completing a layout (context, "
                    "workspaces, fragmentation)",
                    0.0, 0.9)
      ->capture_default_str();
  return [options, &common](std::ostream& out) { return run_simulate(*options, common, out); };
}

}  // namespace sextant::tools
