// Best completion of a partial layout: knobs the user left out are chosen by
// trying their options and keeping the fastest layout that fits in memory.
#pragma once

#include <optional>
#include <vector>

#include "sim/analytic/simulation_result.h"
#include "sim/core/config_error.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::search {

struct CompletionOptions {
  /// Fraction of GPU memory kept free for the CUDA context, library workspaces
  /// and allocator fragmentation; a layout fits when it needs at most the rest.
  double memory_headroom = 0.05;
  /// false: rank layouts that do not fit too (to show a fully given layout anyway).
  bool require_memory_fit = true;
};

struct Completion {
  std::optional<sim::SimulationResult> best;  // empty when nothing valid fits
  long evaluated = 0;                          // complete layouts considered
  long valid = 0;                              // of those, valid for the model and GPU count
  long fitting = 0;                            // of those, fitting in memory
  /// When `best` is empty: why the first valid-but-too-big or invalid layout failed.
  std::vector<sim::Diagnostic> reasons;
};

/// Candidates for each knob left out of `partial`: tp and cp powers of two that
/// divide the heads (and the sequence), pp dividing the layers, dp filling the
/// GPUs, vpp dividing the layers per stage, mbs dividing the batch per replica,
/// every recompute mode, zero 0 and 1 (and 2, 3 when pp = 1), sp on and off. Precision (bf16), the
/// attention kernel (flash) and tp_comm_overlap (off) are not searched: they
/// change numerics or need special set-up, so the user opts in. The data-parallel
/// overlaps default on (Megatron's recommended recipes use them).
Completion complete_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                           const sim::CostProfile& profile, long gpus,
                           const sim::PartialLayout& partial,
                           const CompletionOptions& options = {});

}  // namespace sextant::search
