#include "sim/compute/device_rates.h"

namespace sextant::sim {

namespace {

// A separate accumulation pass, bytes per parameter and micro-batch. bf16
// (DeepSpeed BF16_Optimizer): clear_lp_grads zeroes the bf16 gradient (write
// 2), update_hp_grads reads it (2) and the fp32 sum (4) and writes the sum (4).
// fp16 (autograd AccumulateGrad into .grad): read both fp16 gradients, write one.
constexpr double kBf16SeparateAccumulationBytes = 12.0;
constexpr double kFp16SeparateAccumulationBytes = 6.0;

}  // namespace

DeviceRates device_rates(const GpuConfig& gpu, const CostProfile& p, Precision precision, LaunchMode launch_mode) {
  DeviceRates r;
  r.fp8 = precision == Precision::kFp8;
  const double sustained = p.sustained_compute_fraction;
  r.bf16_gemm_flops_per_s = gpu.peak_bf16_flops_per_s * p.gemm_efficiency * sustained;
  r.gemm_flops_per_s = r.fp8 ? gpu.peak_fp8_flops_per_s * p.fp8_gemm_efficiency * sustained
                             : r.bf16_gemm_flops_per_s;
  r.attention_forward_flops_per_s =
      gpu.peak_bf16_flops_per_s * p.flash_attention_forward_efficiency * sustained;
  r.attention_backward_flops_per_s =
      gpu.peak_bf16_flops_per_s * p.flash_attention_backward_efficiency * sustained;
  r.memory_bytes_per_s = gpu.memory_bandwidth_bytes_per_s * p.memory_efficiency;
  r.kernel_overhead_s = p.kernel_overhead_s;
  r.sm_count = gpu.sm_count;
  r.compute_capability = gpu.compute_capability;
  r.tile_m = p.gemm_tile_m;
  r.tile_n = p.gemm_tile_n;
  r.gemm_k_half = p.gemm_k_half;
  r.attention_half_efficiency_tiles = p.flash_attention_half_efficiency_tiles;
  r.cross_entropy = p.behaviour.cross_entropy;
  if (p.behaviour.gradient_accumulation == GradientAccumulation::kSeparatePass) {
    r.gradient_accumulation_bytes_per_param = precision == Precision::kFp16
                                                  ? kFp16SeparateAccumulationBytes
                                                  : kBf16SeparateAccumulationBytes;
  }
  r.software = p.software;
  r.tables = p.tables.get();
  r.measured_kernel_gap_s = measured_kernel_gap_s(p, launch_mode);
  if (p.tables && p.tables->overheads) {
    r.host_step_s = p.tables->overheads->host_step_s;
    r.graph_launch_s = p.tables->overheads->graph_launch_s;
  }
  if (p.fit) {
    r.compute_time_factor = p.fit->parameter(kFitComputeTimeFactor, 1.0);
    r.step_overhead_s = p.fit->parameter(kFitStepOverhead, 0.0);
    r.microbatch_overhead_s = p.fit->parameter(kFitMicrobatchOverhead, 0.0);
  }
  return r;
}

}  // namespace sextant::sim
