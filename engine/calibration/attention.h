// The engine's causal flash attention (kernels/flash_attention.h) forward and
// backward, bf16, with as many key/value heads as query heads. The backward is
// timed on the forward's own output and log-sum-exp.
#pragma once

#include <cstddef>

#include "engine/calibration/calibration_shapes.h"
#include "engine/calibration/measured_profile.h"
#include "engine/calibration/timing.h"

namespace sextant::engine::calibration {

std::size_t attention_scratch_bytes(const AttentionShape& shape, std::size_t l2_bytes);

/// Forward plus backward at 400 TFLOP/s (progress estimates only).
double attention_estimate_s(const AttentionShape& shape);

AttentionPoint measure_attention(const AttentionShape& shape, const MeasurementContext& ctx);

}  // namespace sextant::engine::calibration
