// Why a layout is invalid, does not fit, or what limits it — in sentences a
// user can act on ("activations need 93.1 GiB on stage 0; 76.0 GiB available;
// try recompute=selective or pp=16").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/search_constraints.h"
#include "sim/analytic/simulation_result.h"
#include "sim/core/config_error.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::search {

struct Explanation {
  bool valid = false;
  bool fits = false;
  std::string layout;               // the completed layout explained (empty if none)
  std::vector<std::string> lines;   // the explanation, one sentence per line
  std::vector<sim::Diagnostic> reasons;  // why it is invalid (empty when valid)
  /// The explained layout's mechanisms without a dev case or an engine run
  /// (mechanism_evidence.h), each with what is missing.
  std::vector<std::string> ungrounded;
  /// When `ungrounded` is not empty and the layout fits: the fastest layout
  /// whose every mechanism has evidence (grounded_layout.h), explained in `lines`.
  std::optional<sim::SimulationResult> grounded_runner_up;
};

/// Completes `partial` with the fastest valid layout (fitting or not) and
/// explains it; an invalid layout gets every rule it breaks. A fitting layout
/// that rests on an ungrounded mechanism is shown beside the fastest grounded
/// one: its layout, step time, MFU, memory and where its step loses time.
Explanation explain_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                           const sim::CostProfile& profile, long gpus,
                           const sim::PartialLayout& partial, const SearchConstraints& constraints);

/// One line on what limits a fitting layout most, e.g. "pipeline bubble (8.1 % of the step)".
std::string describe_limiter(const sim::SimulationResult& result, const sim::ClusterConfig& cluster,
                             double memory_limit_bytes);

}  // namespace sextant::search
