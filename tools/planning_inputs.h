// What simulate and search both read from the command line: the model,
// cluster, cost profile and partial layout, checked against each other.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::tools {

/// Largest --global-batch and --seq-length taken (2^30, the model loader's bound on sizes).
constexpr long kLargestBatch = 1L << 30;
constexpr long kLongestSequence = 1L << 30;

struct PlanningArguments {
  std::string model;
  std::string cluster;
  std::string profile;     // empty: the GPU's default profile
  std::string framework;   // empty: the profile's own sustained fraction
  std::string layout;      // --layout spec
  int global_batch = 0;    // 0: take gbs from the layout
  long seq_length = 0;     // 0: the model's
  long nodes = 0;          // 0: the cluster preset's num_nodes
  std::string mfu = "megatron";  // --mfu: megatron | causal
};

struct PlanningInputs {
  sim::ModelConfig model;
  sim::ClusterConfig cluster;
  sim::CostProfile profile;
  sim::PartialLayout layout;  // gbs is always set
};

/// The SimulationContext of these inputs (names, GPU count, --mfu convention).
struct SimulationContext;
SimulationContext simulation_context(const PlanningInputs& in, const PlanningArguments& arguments,
                                     long gpus, const std::string& engine);

/// Loads and cross-checks; throws sim::ConfigError (exit code 2) naming the
/// option at fault: --model or --cluster not given (both required: nothing is
/// assumed), a --global-batch that contradicts gbs=, no global batch at all.
PlanningInputs load_planning_inputs(const std::string& configs_dir,
                                    const PlanningArguments& arguments);

/// Registers --model, --cluster, --layout, --global-batch, --seq-length, --nodes,
/// --profile and --framework on `command` (load_planning_inputs requires --model and --cluster).
void add_planning_options(CLI::App& command, PlanningArguments& arguments);

/// Throws unless the cluster has `gpus` GPUs.
void check_gpu_count(long gpus, const sim::ClusterConfig& cluster);

}  // namespace sextant::tools
