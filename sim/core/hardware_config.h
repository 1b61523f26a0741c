// GPUs and clusters, as configs/gpus/*.yaml and configs/clusters/*.yaml describe them.
// Every number in those files cites its datasheet (DESIGN.md, "YAML presets").
#pragma once

#include <cstdint>
#include <string>

namespace sextant::sim {

struct GpuConfig {
  std::string name;
  double peak_bf16_flops_per_s = 0;  // dense tensor-core peak
  double peak_fp8_flops_per_s = 0;   // 0: the GPU has no FP8 tensor cores
  double peak_fp32_flops_per_s = 0;
  std::int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  int sm_count = 0;
  // CUDA compute capability (9.0 for Hopper), or 0 where the preset does not say: kernels
  // that run only on one capability (the engine's sm_90a attention backward) are then
  // costed as on any other device.
  double compute_capability = 0;
  std::string source;
};

struct ClusterConfig {
  std::string name;
  GpuConfig gpu;
  int gpus_per_node = 0;
  int num_nodes = 0;
  double intra_node_bandwidth_bytes_per_s = 0;  // per GPU, per direction (NVLink)
  double inter_node_bandwidth_bytes_per_s = 0;  // per GPU, per direction (its own NIC)
  double intra_node_latency_s = 0;
  double inter_node_latency_s = 0;
  std::string source;

  std::int64_t total_gpus() const {
    return static_cast<std::int64_t>(gpus_per_node) * num_nodes;
  }
};

}  // namespace sextant::sim
