// Achieved rates of one GPU: its datasheet peaks times the profile's efficiencies.
// Built once per simulation so the inner loops multiply nothing twice.
#pragma once

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct DeviceRates {
  double gemm_flops_per_s = 0;            // bf16 or fp8 GEMMs, before shape effects
  double attention_forward_flops_per_s = 0;
  double attention_backward_flops_per_s = 0;
  double bf16_gemm_flops_per_s = 0;       // unfused attention GEMMs stay bf16
  double memory_bytes_per_s = 0;
  double kernel_overhead_s = 0;
  int sm_count = 1;
  int tile_m = 128;
  int tile_n = 128;
  double gemm_k_half = 0;
  double attention_half_efficiency_tiles = 0;
  bool fp8 = false;
};

DeviceRates device_rates(const GpuConfig& gpu, const CostProfile& profile, Precision precision);

}  // namespace sextant::sim
