// How our engine launches its kernels, for a measured profile of it
// (`software: sextant-engine`): the step replayed as one CUDA graph on one GPU
// (engine/trainer.cc), each kernel followed by the graph's per-kernel gap
// (overheads.graph_kernel_s); with several ranks — dp, tp or pp, whose
// collectives meet other processes — every kernel launched from the host, each
// followed by a stream launch's gap (overheads.kernel_launch_s), as `run
// --compare` and `--timing` time tasks on one GPU too. Measured on H200:
// 0.89 µs against 3.40 µs a kernel (configs/profiles/measured/).
// A run condition, not a property of the profile: sim/compute/stage_rates.h
// turns it into the rates each stage runs at.
#pragma once

#include <cstdint>

#include "sim/core/cost_profile.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

enum class LaunchMode : std::uint8_t {
  kGraphReplay,      // the step replayed as one CUDA graph, as `sextant calibrate` times kernels
  kKernelsLaunched,  // every kernel launched from the host
};

/// How our engine runs `model` under `layout` where `profile` describes it:
/// every kernel launched on more than one GPU or for a model with MoE layers
/// (each waits on the host for its experts' row counts, which a graph cannot:
/// engine/transformer/moe_layer.h), a graph replay otherwise. Other software's
/// profiles say nothing of our engine's launches: kGraphReplay, as measured.
LaunchMode engine_launch_mode(const CostProfile& profile, const ModelConfig& model, const ParallelLayout& layout);

/// How the engine times tasks (`run --compare`, `--timing`): every kernel
/// launched, as CUDA events cannot time inside a graph replay.
inline constexpr LaunchMode kTaskTimingLaunchMode = LaunchMode::kKernelsLaunched;

/// The gap a kernel of `profile`'s tables leaves on its stream under `mode`:
/// overheads.graph_kernel_s or overheads.kernel_launch_s; without measured
/// overheads the profile's kernel_overhead_s either way.
double measured_kernel_gap_s(const CostProfile& profile, LaunchMode mode);

}  // namespace sextant::sim
