// The engine's memory-bound kernels (kernels/: norms, activations, RoPE,
// embedding, cross entropy, bias gradient, residual, AdamW, gradient norm),
// each called as engine/transformer/ and engine/trainer.cc call it, at
// (rows, width) of the tensor it sweeps.
#pragma once

#include <cstddef>
#include <string>

#include "engine/calibration/calibration_shapes.h"
#include "engine/calibration/measured_profile.h"
#include "engine/calibration/timing.h"

namespace sextant::engine::calibration {

/// Scratch `kernel` needs at `shape`. Needs a CUDA device (some workspaces ask CUB).
std::size_t elementwise_scratch_bytes(const std::string& kernel, const ElementwiseShape& shape,
                                      std::size_t l2_bytes);

/// Bytes moved at 3 TB/s plus 5 us (progress estimates only).
double elementwise_estimate_s(const std::string& kernel, const ElementwiseShape& shape);

/// Median seconds of one call. kernel: one of elementwise_kernel_names().
ElementwisePoint measure_elementwise(const std::string& kernel, const ElementwiseShape& shape,
                                     const MeasurementContext& ctx);

}  // namespace sextant::engine::calibration
