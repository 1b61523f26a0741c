// The training software a prediction describes: Megatron-Core 0.8 as in
// Megatron-LM's 2024 H100 runs, NeMo 24.07's performance recipes, Megatron-LM
// of 2021 and 2022, DeepSpeed's pipeline engine of 2021-22, Megatron-Core 0.12
// as in Megatron-LM's Llama examples ... (configs/frameworks/*.yaml, `--framework NAME`).
//
// The GPU profile (configs/profiles) says what the kernels reach one at a time;
// the framework says what the software runs and how much of those rates a
// whole training step of it sustains. What it runs is named behaviour
// (framework_behaviour.h: how pipeline stages exchange data, which loss and
// gradient-accumulation kernels, what it supports at all), read by both
// engines. What is left, the sustained fraction (the gaps between kernels, the
// host work the step waits on, the kernels the simulator does not list one by
// one), is fitted on the dev cases that ran that software, and each framework
// file says which (or whose it borrows, where no dev case ran it).
#pragma once

#include <optional>
#include <string>

#include "sim/core/cost_profile.h"
#include "sim/core/framework_behaviour.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct Framework {
  std::string name;
  std::string description;
  /// Replaces the profile's sustained_compute_fraction (cost_profile.h);
  /// absent where no dev case ran the software (the profile's own is kept).
  std::optional<double> sustained_compute_fraction;
  FrameworkBehaviour behaviour;
  FrameworkSupport supports;
  std::string source;
};

/// `profile` as `framework` runs it: its sustained fraction and behaviour, its name recorded.
CostProfile with_framework(CostProfile profile, const Framework& framework);

/// Restricts `layout` to what `framework` can run: knobs left open are set to
/// the one value it supports (no interleaving: schedule 1F1B and vpp 1; no
/// flash attention: the unfused core; no overlap: the flag off; no context or
/// expert parallelism: cp, ep, etp 1; no uneven split: the even one; with a
/// pipeline, the highest ZeRO stage it runs there; zero 0 where it runs no
/// other), and a knob given a value it cannot run is an error. Knobs with
/// several supported values stay open: the search offers only those
/// (SearchConstraints::supports). Throws ConfigError naming every such knob
/// and its supports: key, with `source` as the input's name ("--layout", a
/// case id) and the framework file.
void restrict_to_framework(PartialLayout& layout, const Framework& framework,
                           const std::string& source);

}  // namespace sextant::sim
