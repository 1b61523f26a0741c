// The engine's causal flash attention (kernels/flash_attention.h) forward and
// backward, bf16, with the shape's key/value heads (as many as the query heads:
// multi-head attention; fewer: grouped-query, whose backward sums dK and dV over
// each group's query heads and, where the GPU would be underfilled, expands K
// and V to every query head first: kernels/flash_attention.h). The backward is
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
