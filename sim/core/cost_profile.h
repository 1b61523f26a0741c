// Efficiencies that turn hardware peaks into achieved rates, per GPU type.
//
// Default profiles are configs/profiles/<gpu>.yaml; `--profile FILE` replaces
// them. Every field says in its YAML where it was measured or what it was
// fitted on (STYLE.md: "a tuned efficiency says what it was fitted on").
#pragma once

#include <string>

namespace sextant::sim {

struct CostProfile {
  std::string name;
  std::string gpu;  // the GPU preset this profile describes
  /// Fraction of the dense bf16 peak the largest GEMMs reach, before the
  /// wave-quantisation and memory-bound corrections of gemm_time.
  double gemm_efficiency = 0;
  /// Same for FP8 GEMMs, against the FP8 peak (Micikevicius et al. 2022).
  double fp8_gemm_efficiency = 0;
  /// Output tile of the GEMM kernels, for wave quantisation (tiles per SM wave).
  int gemm_tile_m = 0;
  int gemm_tile_n = 0;
  /// Inner dimension at which a GEMM reaches half its large-k efficiency: the
  /// efficiency is scaled by k/(k + gemm_k_half) (short k: prologue/epilogue dominate).
  double gemm_k_half = 0;
  /// Fraction of the bf16 peak causal flash attention reaches, forward and backward.
  double flash_attention_forward_efficiency = 0;
  double flash_attention_backward_efficiency = 0;
  /// Query tiles (batch·heads·s/128) at which flash attention reaches half its
  /// efficiency: scaled by u/(u + this), too few tiles leave SMs idle.
  double flash_attention_half_efficiency_tiles = 0;
  /// Compute rate sustained over whole training steps on many GPUs, as a
  /// fraction of the single-kernel rates above: clocks lowered by the power cap
  /// under sustained load, SMs shared with overlapped communication kernels,
  /// gaps between kernels. Scales GEMM and attention rates; fitted end to end.
  double sustained_compute_fraction = 1;
  /// Fraction of the HBM bandwidth memory-bound kernels reach.
  double memory_efficiency = 0;
  /// Fixed cost of one kernel launch on the critical path.
  double kernel_overhead_s = 0;
  /// Fraction of the per-direction link bandwidth a large NCCL collective reaches.
  double nvlink_efficiency = 0;
  /// Fixed cost of one collective or send as Megatron issues it (torch.distributed
  /// call, NCCL kernel launch and handshake), paid once per call.
  double collective_launch_s = 0;
  double network_efficiency = 0;
  std::string source;
  /// The framework (sim/core/framework.h) whose sustained fraction replaced the
  /// profile's own; empty when the profile's own is used.
  std::string framework;
};

}  // namespace sextant::sim
