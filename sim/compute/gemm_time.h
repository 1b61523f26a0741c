// Time of one GEMM C(m×n) = A(m×k)·B(k×n) on one GPU: a roofline with wave quantisation.
//
// Compute: 2·m·n·k FLOPs at the achieved GEMM rate, stretched by wave
// quantisation — the kernel runs ceil(m/tile_m)·ceil(n/tile_n) output tiles in
// waves of sm_count, and a partial last wave leaves SMs idle (NVIDIA "Matrix
// Multiplication Background User's Guide", Sec. "Wave Quantization"); and a
// short inner dimension k amortises each tile's prologue and epilogue over
// fewer steps, scaling the rate by k/(k + k_half). The form and its constants
// were fitted on our H100 cuBLAS sweep (reports/measurements/2026-11-22-h100-calibration).
// Memory: A, B and C once each (bf16: 2 bytes; an fp32 accumulator C, as the
// weight-gradient GEMMs of Megatron's fp32 main_grad use, 8 bytes read+write).
// The time is the larger of the two plus a fixed per-kernel overhead.
#pragma once

#include "sim/compute/device_rates.h"

namespace sextant::sim {

struct GemmShape {
  double m = 0, n = 0, k = 0;
  double batch = 1;             // independent GEMMs of this shape in one launch
  bool accumulate_fp32 = false;  // C is an fp32 accumulator (read and written)
};

double gemm_time_s(const GemmShape& shape, double flops_per_s, const DeviceRates& rates);

/// Fraction of the SMs' time spent on useful tiles (1 = no partial wave).
double wave_efficiency(double m, double n, double batch, const DeviceRates& rates);

}  // namespace sextant::sim
