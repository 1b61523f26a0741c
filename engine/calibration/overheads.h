// Fixed costs around the kernels: a stream-ordered launch, a kernel inside a
// replayed CUDA graph, one cudaGraphLaunch, and the host's part of a training
// step. The tiny kernel is the engine's residual_add on 8 elements (one
// 16-byte vector), whose own work is negligible beside its launch.
#pragma once

#include "engine/calibration/measured_profile.h"
#include "engine/calibration/timing.h"

namespace sextant::engine::calibration {

/// kernel_launch_s: 256 back-to-back launches between CUDA events, per launch.
/// graph_kernel_s: one replay of a graph of 256 such kernels, per kernel.
/// graph_launch_s: a one-kernel graph replayed back to back, per replay, less graph_kernel_s.
/// host_step_s: wall clock of what `sextant run` does on the host each step: upload
///   one micro-batch of tokens (8 x 2048 int32, pageable), one kernel, read one
///   float back, synchronise the stream.
/// Each the median of ctx.timing.repeats.
Overheads measure_overheads(const MeasurementContext& ctx);

}  // namespace sextant::engine::calibration
