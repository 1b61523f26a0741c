// The generated grid the invariant (metamorphic) suites run over, one test per
// model preset looping over its layouts (a failure names both): model presets
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

/// The grid's model presets, for INSTANTIATE_TEST_SUITE_P: cheap to list, so
/// that every test process (ctest runs each test in its own) starts fast.
std::vector<std::string> grid_models();
/// The presets small enough (at most 8B) for the event engine's checks.
std::vector<std::string> small_grid_models();

/// Every valid layout of the grid for model preset `model` (about 100-200).
std::vector<GridCase> grid_cases(const std::string& model);

/// The cases of `model` whose layout satisfies `keep`.
std::vector<GridCase> grid_cases_where(const std::string& model,
                                       bool (*keep)(const sim::ParallelLayout&));

/// Every `stride`-th case of `model`: a deterministic sample.
std::vector<GridCase> sampled_cases(const std::string& model, std::size_t stride);

/// A gtest parameter name for a model preset: [A-Za-z0-9_] only.
std::string grid_model_name(const std::string& model);

/// Whether `layout` is valid for `model` on the grid's cluster.
bool grid_valid(const sim::ModelConfig& model, const sim::ParallelLayout& layout);

}  // namespace sextant::testing
