// The engine's linear layers on the GPU: the three products of
// kernels/gemm_cublaslt.h (forward, input gradient, weight gradient into an fp32
// accumulator) through the engine's own CublasLtGemm, with the algorithm the
// engine picks: its wrapper tunes each new problem over cuBLASLt's heuristic
// candidates and keeps the fastest, as `sextant run` does before its first step.
#pragma once

#include <cstddef>

#include "engine/calibration/calibration_shapes.h"
#include "engine/calibration/measured_profile.h"
#include "engine/calibration/timing.h"
#include "kernels/gemm_cublaslt.h"

namespace sextant::engine::calibration {

/// Scratch one shape needs: its rotated buffer sets.
std::size_t linear_scratch_bytes(const LinearShape& shape, std::size_t l2_bytes);

/// Seconds the three products should take at 600 TFLOP/s and 3 TB/s (for
/// progress estimates only).
double linear_estimate_s(const LinearShape& shape);

/// Times the kLinearProducts products of `shape` (each tuned first, then the
/// median of ctx.timing, inside a CUDA graph as the engine runs them). gemm: the engine's wrapper, one per run (it remembers each
/// problem's tuned algorithm).
LinearPoint measure_linear(const LinearShape& shape, kernels::CublasLtGemm& gemm, const MeasurementContext& ctx);

}  // namespace sextant::engine::calibration
