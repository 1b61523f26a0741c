// The power cap per pipeline stage. analytic/power_cap.h holds every GPU at
// one sustained clock set by the step's HFU. A GPU's clock follows its own
// power draw, and a pipeline's stages draw differently: the last holds the
// output layer (with tied embeddings the largest GEMM of the model) and never
// idles in a warm-up bubble, while the first stages wait at both ends of the
// step. Measured on 4 x H200, GPT-1.3B pp=4 mbs 2 gbs 64 (nvidia-smi every
// 250 ms, reports/measurements/2026-11-27-h200x4-parallel-engine): stages 0-2
// at 1,952-1,956 MHz and 606-615 W, the last at 1,736 MHz and 666 W (700 W
// cap), its transformer layers 7.4 % slower than the same layers on stage 0.
//
// Each stage's activity is the step's burst-clock HFU times the stage's
// compute time over the mean stage's: its share of the step's hardware
// FLOPs, counted at the burst clock's kernel efficiencies (a first-order
// share: memory-bound kernels draw less than their time suggests). One stage
// (pp = 1), or stages of equal compute, is exactly the uniform model the
// profile's power_cap_hfu was fitted with.
#pragma once

#include <vector>

#include "sim/event/event_engine.h"

namespace sextant::sim {

/// f_burst / f of each pipeline stage of `burst` (a timeline played at the
/// burst clock): power_cap_slowdown(burst_hfu · stage compute / mean stage
/// compute, cap_hfu). All 1 when cap_hfu <= 0.
std::vector<double> stage_power_cap_slowdowns(const Timeline& burst, double burst_hfu, double cap_hfu);

}  // namespace sextant::sim
