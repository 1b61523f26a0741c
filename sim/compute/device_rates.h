// Achieved rates of one GPU: its datasheet peaks times the profile's efficiencies,
// and, for a measured profile, its kernel tables and the fit's terms.
// Built once per simulation so the inner loops multiply nothing twice.
#pragma once

#include "sim/compute/launch_mode.h"
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
  double compute_capability = 0;  // the GPU preset's (0: not stated)
  int tile_m = 128;
  int tile_n = 128;
  double gemm_k_half = 0;
  double attention_half_efficiency_tiles = 0;
  bool fp8 = false;

  /// Framework behaviour (framework_behaviour.h) the kernel lists read: the
  /// loss's kernels, and the bytes per local parameter a separate gradient
  /// accumulation pass moves every micro-batch (0: fused into the GEMM).
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::kUnfused;
  double gradient_accumulation_bytes_per_param = 0;
  /// Whose kernel list a layer runs (sim/compute/layer_time.cc picks by it).
  Software software = Software::kMegatronPublished;
  /// Measured kernel times (null: roofline only). Points into the profile.
  const MeasuredTables* tables = nullptr;
  /// Gap a measured kernel adds on the stream under the run's launch mode
  /// (launch_mode.h: measured_kernel_gap_s).
  double measured_kernel_gap_s = 0;
  /// Per-step host work (token upload, loss read-back, synchronisation) and
  /// the one cudaGraphLaunch of the engine's step; 0 for Megatron profiles.
  double host_step_s = 0;
  double graph_launch_s = 0;
  /// The fit's terms (profile `fit:`; neutral without one): every kernel time
  /// is multiplied by compute_time_factor, and step and micro-batch overheads added.
  double compute_time_factor = 1;
  double step_overhead_s = 0;
  double microbatch_overhead_s = 0;
};

/// One GPU at the profile's (calibrated) clock, its kernels launched as `launch_mode` says.
/// The rates each pipeline stage runs at under a run's conditions are stage_rates.h's.
DeviceRates device_rates(const GpuConfig& gpu, const CostProfile& profile, Precision precision,
                         LaunchMode launch_mode = LaunchMode::kGraphReplay);

}  // namespace sextant::sim
