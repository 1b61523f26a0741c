#include "tools/run_layout.h"

#include <cstdio>
#include <string>

#include "engine/training/engine_support.h"
#include "search/layout_search.h"
#include "sim/core/config_error.h"

namespace sextant::tools {

void throw_option_error(const std::string& option, const std::string& key, const std::string& message) {
  throw sim::ConfigError({{option, 0, 0, key, message}});
}

sim::ParallelLayout run_layout(const std::string& layout, int world_size, int global_batch) {
  return engine::training::executable_layout(sim::parse_layout(layout), world_size, global_batch);
}

// `--layout best`: the search's best layout of this run's ranks (the world a
// launcher started, one GPU without one) on the cluster that the engine
// executes: bf16 with flash attention, cp = ep = 1, and whatever else
// run_layout accepts (zero 0 or 1, no zero-bubble schedule, ...), tried in the
// search's order through run_layout itself, so the two never disagree.
// Every rank searches alike (the search's order is total), so all pick the same.
std::string best_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                        const sim::CostProfile& profile, int world_size, int global_batch, std::string& note) {
  if (global_batch <= 0)
    throw_option_error("--layout", "best", "needs the global batch: give --global-batch N");
  sim::PartialLayout partial;
  partial.gbs = global_batch;
  partial.cp = partial.ep = partial.etp = 1;
  partial.precision = sim::Precision::kBf16;
  partial.attention = sim::AttentionKernel::kFlash;
  search::SearchOptions options;
  options.top = 200;  // the engine's first is among them (zero-bubble and ZeRO-2/3 are skipped)
  options.constraints.tp_within_node = true;
  const long gpus = world_size;
  const search::SearchResult r = search::search_layouts(model, cluster, profile, gpus, partial, options);
  for (std::size_t i = 0; i < r.best.size(); ++i) {
    const sim::ParallelLayout& l = r.best[i].layout;
    const std::string spec = l.to_spec();
    try {
      run_layout(spec, world_size, global_batch);
    } catch (const sim::ConfigError&) {
      continue;  // a knob the engine does not execute
    }
    char line[512];
    std::snprintf(line, sizeof line,
                  "layout best: %s (the search's %s of %ld layouts on %ld x %s%s; profile %s, predicted %.1f ms/step)",
                  spec.c_str(), i == 0 ? "first" : ("#" + std::to_string(i + 1)).c_str(), r.evaluated, gpus,
                  cluster.gpu.name.c_str(), i == 0 ? "" : ", the fastest the engine runs", profile.name.c_str(),
                  r.best[i].step_time_s * 1e3);
    note = line;
    return spec;
  }
  throw_option_error("--layout", "best",
                     "no layout of " + model.name + " with global batch " + std::to_string(global_batch) +
                         " on " + std::to_string(gpus) + " x " + cluster.gpu.name + " fits and is one the engine runs (" +
                         std::to_string(r.evaluated) + " considered, " + std::to_string(r.feasible) + " fit)");
}

}  // namespace sextant::tools
