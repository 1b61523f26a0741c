// The training software a prediction describes: Megatron-Core 0.8 as in
// Megatron-LM's 2024 H100 runs, NeMo 24.07's performance recipes, Megatron-LM
// of 2021, ... (configs/frameworks/*.yaml, `--framework NAME`).
//
// The GPU profile (configs/profiles) says what the kernels reach one at a time;
// the framework says how much of that a whole training step of that software
// sustains: the gaps between kernels, the host work the step waits on, the
// kernels the simulator does not list one by one. That is a property of the
// software, not of the GPU: our own engine on one H100 sustains its kernels'
// rates (issue 12: predicted 25-49 % too slow with Megatron's 0.71), while
// NeMo 24.07's FP8 recipes sustain more than Megatron-Core 0.8's bf16 runs. Each
// framework's fraction is fitted on the dev cases that ran it, and says which.
#pragma once

#include <string>

#include "sim/core/cost_profile.h"

namespace sextant::sim {

struct Framework {
  std::string name;
  std::string description;
  /// Replaces the profile's sustained_compute_fraction (cost_profile.h).
  double sustained_compute_fraction = 1;
  std::string source;
};

/// `profile` as `framework` runs it: its sustained fraction, its name recorded.
CostProfile with_framework(CostProfile profile, const Framework& framework);

}  // namespace sextant::sim
