// The SM clock a GPU holds under its power cap, for a measured profile.
//
// `sextant calibrate` times each kernel in short CUDA-graph replays, at the
// clock the GPU reaches in bursts (1,980 MHz on our H100). A training step is
// sustained load: an H100 SXM then sits at its 700 W cap and lowers its clock
// (1,485-1,695 MHz at 690 W during GPT-1.3B at mbs 4, nvidia-smi every 250 ms:
// reports/measurements/2026-11-23-h100-calibration-check-2/smi-during-engine-vs-pytorch.csv),
// while GPT-350M at mbs 1 ran at the calibrated speed. Dynamic power is
// P ~ a·C·V²·f with the voltage rising about linearly with f over the DVFS
// range, so P ~ a·f³ (Weste & Harris, CMOS VLSI Design, 4th ed., Sec. 5.2;
// the cube law of DVFS, e.g. Mei et al. 2017, "A survey and measurement study
// of GPU DVFS on energy conservation", Sec. 2). With a the activity at the
// burst clock — the hardware FLOP rate over the peak, the step's HFU predicted
// from the burst-clock tables — the cap holds the clock at
//   f / f_burst = min(1, (a_cap / a)^(1/3)),
// a_cap the activity at which the cap is reached at the burst clock: the
// profile's fit parameter `power_cap_hfu` (fitted by `sextant fit-profile` on
// our own engine runs). Every kernel's time is scaled by f_burst / f (memory-
// bound kernels less so in truth: the one-factor approximation of this model).
// sim/compute/stage_rates.h applies these slowdowns to each stage's rates.
#pragma once

#include <span>
#include <vector>

namespace sextant::sim {

/// f_burst / f: max(1, (burst_hfu / cap_hfu)^(1/3)); 1 when cap_hfu <= 0.
double power_cap_slowdown(double burst_hfu, double cap_hfu);

/// Per pipeline stage. A GPU's clock follows its own power draw, and a
/// pipeline's stages draw differently: the last holds the output layer (with
/// tied embeddings the largest GEMM of the model) and never idles in a
/// warm-up bubble, while the first stages wait at both ends of the step.
/// Measured on 4 x H200, GPT-1.3B pp=4 mbs 2 gbs 64 (nvidia-smi every 250 ms,
/// reports/measurements/2026-11-27-h200x4-parallel-engine): stages 0-2 at
/// 1,952-1,956 MHz and 606-615 W, the last at 1,736 MHz and 666 W (700 W cap),
/// its transformer layers 7.4 % slower than the same layers on stage 0.
/// Each stage's activity is the step's burst-clock HFU times the stage's
/// compute time over the mean stage's: its share of the step's hardware
/// FLOPs, counted at the burst clock's kernel efficiencies (first order:
/// memory-bound kernels draw less than their time suggests). One stage, or
/// stages of equal compute, is exactly the uniform model above, the one the
/// profile's power_cap_hfu was fitted with (one stage: power_cap_slowdown of
/// the step's HFU, whatever its compute). Returns each stage's f_burst / f
/// (all 1 when cap_hfu <= 0).
std::vector<double> stage_power_cap_slowdowns(std::span<const double> stage_compute_s, double burst_hfu,
                                              double cap_hfu);

}  // namespace sextant::sim
