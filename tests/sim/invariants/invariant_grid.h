// The generated grid the invariant (metamorphic) suites run over: model presets
// (GPT and Llama sizes, Mixtral) crossed with layouts of every kind the
// simulator models (tp, pp with and without interleaving, dp, ZeRO 0/1/3,
// recomputation, micro-batch size, expert parallelism for Mixtral), on DGX H100
// with the H100's default profile. Only layouts check_layout accepts are kept;
// whether they fit in memory does not matter to an invariant.
#pragma once

#include <string>
#include <vector>

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::testing {

struct GridCase {
  sim::ModelConfig model;
  sim::ParallelLayout layout;
  /// "llama3-8b tp=8,pp=1,...": what a failure names.
  std::string describe() const;
};

/// The shared inputs: the cluster and profile every grid case runs on.
struct GridHardware {
  sim::ClusterConfig cluster;
  sim::CostProfile profile;
};
const GridHardware& grid_hardware();

/// The whole grid (built once; about a thousand cases).
const std::vector<GridCase>& invariant_grid();

/// The grid's cases whose layout satisfies `keep`.
std::vector<GridCase> grid_where(bool (*keep)(const sim::ParallelLayout&));

/// A small deterministic sample of the grid (every `stride`-th case of the
/// models at most 8B), for the slower event-engine checks.
std::vector<GridCase> sampled_grid(std::size_t stride);

/// A gtest parameter name: the case's index, model and main knobs, [A-Za-z0-9_] only.
std::string grid_case_name(const GridCase& c, std::size_t index);

/// Whether `layout` is valid for `model` on the grid's cluster.
bool grid_valid(const sim::ModelConfig& model, const sim::ParallelLayout& layout);

}  // namespace sextant::testing
