// `sextant search`'s output: the best layouts as JSON (the DESIGN.md shape) or
// as a table for people, and a progress bar while it searches.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "search/layout_search.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

/// What the search ran on, for its header, columns and footer.
struct SearchOutput {
  const sim::ModelConfig& model;
  const sim::ClusterConfig& cluster;
  const sim::CostProfile& profile;
  long gpus = 0;
  int global_batch = 0;
  double memory_headroom = 0;  // --memory-headroom
  const SimulationContext& context;
};

/// "tp=8 pp=4 dp=2 mbs=1 sp rc=selective zero=1 ovl=gp": a layout in the
/// table's abbreviations (search_table_legend).
std::string short_layout(const sim::ParallelLayout& layout);

/// {"evaluated", "valid", "feasible", "search_time_s", "profile", "results"}:
/// the best layouts' simulate JSON, each with why it is limited ("limited_by")
/// and the mechanisms it uses that have no evidence ("ungrounded", a list of
/// "zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine)"; empty when none).
nlohmann::json search_json(const SearchOutput& output, const search::SearchResult& result);

/// The best layouts, one line each, with the header, the legend and the footer.
std::string search_table(const SearchOutput& output, const search::SearchResult& result);

/// The table's note when the best layout with tp across nodes (`across`)
/// beats the best with tp inside one (`within`): by how much, and the flag.
std::string cross_node_tp_note(const sim::ClusterConfig& cluster, const sim::SimulationResult& within,
                               const sim::SimulationResult& across);

/// A progress bar on stderr when it is a terminal, for searches longer than
/// a second; empty (no bar) otherwise.
std::function<void(double)> progress_bar();

}  // namespace sextant::tools
