// Time of the grouped GEMM a MoE layer's experts run (Megatron-Core GroupedMLP,
// --moe-grouped-gemm: one CUTLASS grouped kernel over the rank's local experts).
//
// Expert e multiplies the M_e tokens routed to it by its own weights: a
// (M_e × k)·(k × n) product per expert. Two things make it slower than one
// dense GEMM of the same FLOPs, both by mechanism:
//  - Tiles (NVIDIA "Matrix Multiplication Background User's Guide", Sec.
//    "Wave Quantization"): each expert's rows are padded to whole tiles of
//    tile_m separately, so the grouped kernel runs Σ_e ceil(M_e/tile_m)·
//    ceil(n/tile_n) tiles in waves of sm_count. M_e is not the mean: with
//    routing balanced in expectation, the tokens one expert receives out of
//    the rank's are binomial (≈ Poisson of mean μ, variance μ), and the
//    expected tiles per expert are E[ceil(M/t)] = Σ_{j≥0} P(M > j·t) — more
//    than ceil(μ/t) when μ is a few tiles, and P(M > 0) < 1 when μ is small.
//  - Memory: every expert's weights are read once however few tokens it has
//    (Σ_e k·n elements), plus its inputs and outputs: with small M_e the kernel
//    is bound by bytes / HBM bandwidth, not FLOPs.
// The weight-gradient GEMM (dW_e = dY_eᵀ X_e, inner dimension M_e) pads no
// token dimension: its time is linear in Σ_e (M_e + k_half), so the mean is
// exact and gemm_time_s serves it.
#pragma once

#include "sim/compute/device_rates.h"

namespace sextant::sim {

/// Expected ceil(M / tile) for M ~ Poisson(mean) (normal approximation with a
/// continuity correction above a mean of 30, exact sums below).
double expected_tiles_per_group(double mean_rows, double tile);

/// Forward-type grouped GEMM: `groups` products of (M_e × k)·(k × n), the
/// M_e Poisson-spread around `mean_rows`, bf16 (or fp8) in and out.
double grouped_gemm_time_s(double mean_rows, double n, double k, double groups,
                           double flops_per_s, const DeviceRates& rates);

}  // namespace sextant::sim
