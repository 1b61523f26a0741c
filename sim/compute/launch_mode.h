// How our engine launches its kernels, for a measured profile of it
// (`software: sextant-engine`): the step replayed as one CUDA graph on one GPU
// (engine/trainer.cc), each kernel followed by the graph's per-kernel gap
// (overheads.graph_kernel_s); with several ranks — dp, tp or pp, whose
// collectives meet other processes — every kernel launched from the host, each
// followed by a stream launch's gap (overheads.kernel_launch_s), as `run
// --compare` and `--timing` time tasks on one GPU too. Measured on H200:
// 0.89 µs against 3.40 µs a kernel (configs/profiles/measured/).
#pragma once

#include "sim/core/cost_profile.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// `profile` with every kernel followed by a stream launch's gap instead of a
/// graph node's (CostProfile::kernels_launched; nothing changes without
/// measured overheads).
CostProfile with_launched_kernels(const CostProfile& profile);

/// Whether our engine runs `layout` with every kernel launched where `profile`
/// says otherwise: a sextant-engine profile not yet launched, on more than one GPU.
bool engine_launches_differently(const CostProfile& profile, const ParallelLayout& layout);

/// The profile as our engine runs `layout`: with_launched_kernels where
/// engine_launches_differently, else unchanged.
CostProfile as_engine_launches(const CostProfile& profile, const ParallelLayout& layout);

}  // namespace sextant::sim
