// The layout `sextant run` trains: the --layout spec read for the ranks a
// launcher started, with everything the engine does not execute refused by
// name (exit code 2: engine/training/engine_support.h), and `--layout best`,
// the search's best layout that the engine executes.
#pragma once

#include <string>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/preset_catalog.h"

namespace sextant::tools {

/// Throws sim::ConfigError (exit code 2) for `option` (and layout knob `key`,
/// empty when none): "--layout: tp: 2: `sextant run` trains on one GPU so far".
[[noreturn]] void throw_option_error(const std::string& option, const std::string& key,
                                     const std::string& message);

/// `layout` (a --layout spec) over `world_size` ranks, --global-batch
/// `global_batch` (0: not given), as the engine executes it
/// (engine::training::executable_layout: sim::ConfigError, exit code 2, for
/// anything it does not).
sim::ParallelLayout run_layout(const std::string& layout, int world_size, int global_batch);

/// `--layout best`: the search's (search/layout_search.h) fastest layout of
/// `world_size` GPUs of `cluster` for global batch `global_batch` that fits
/// and that run_layout accepts (tried in the search's order, through
/// run_layout itself), as a full spec; `note` gets a line saying which and
/// the predicted step time. Throws sim::ConfigError when global_batch is 0 or
/// none is found.
std::string best_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                        const sim::CostProfile& profile, int world_size, int global_batch, std::string& note);

}  // namespace sextant::tools
