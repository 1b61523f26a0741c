// The layout `sextant run` trains: the --layout spec read for the ranks a
// launcher started, with everything the engine does not execute refused by
// name (exit code 2), and `--layout best`, the search's best layout that the
// engine executes.
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

/// cp, ep and etp other than 1: sim::ConfigError naming the knob.
void refuse_model_parallel(const sim::PartialLayout& p);

/// `layout` (a --layout spec) over `world_size` ranks: dp fills the ranks
/// tp·pp leaves (or must match them), gbs is --global-batch when given
/// (`global_batch` > 0; default mbs·dp). Throws sim::ConfigError (exit code
/// 2) naming the knob and what is accepted for anything the engine does not
/// execute: cp/ep/etp > 1, zero >= 2, a precision or attention other than
/// bf16/flash, zero-bubble schedules, overlap_grad_reduce=0, fsdp, ...
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
