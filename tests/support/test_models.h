// Models and clusters built in code for tests, so the arithmetic in each test
// can be read next to the numbers it checks.
#pragma once

#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"

namespace sextant::testing {

/// GPT-3 175B as Narayanan et al. 2021 (96 layers, h 12288, 96 heads, V 51200, s 2048).
inline sim::ModelConfig gpt3_175b() {
  sim::ModelConfig m;
  m.name = "gpt3-175b";
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.ffn_hidden_size = 4 * 12288;
  m.num_attention_heads = 96;
  m.num_query_groups = 96;
  m.kv_channels = 128;
  m.vocab_size = 51200;
  m.seq_length = 2048;
  return m;
}

/// DGX A100 with round numbers: 8 GPUs per node, 300 GB/s NVLink, 25 GB/s NIC.
inline sim::ClusterConfig dgx_a100() {
  sim::ClusterConfig c;
  c.name = "dgx-a100";
  c.gpu.name = "a100-sxm-80gb";
  c.gpu.peak_bf16_flops_per_s = 312e12;
  c.gpu.peak_fp32_flops_per_s = 19.5e12;
  c.gpu.memory_bytes = 85899345920;
  c.gpu.memory_bandwidth_bytes_per_s = 2.039e12;
  c.gpu.sm_count = 108;
  c.gpus_per_node = 8;
  c.num_nodes = 560;
  c.intra_node_bandwidth_bytes_per_s = 300e9;
  c.inter_node_bandwidth_bytes_per_s = 25e9;
  c.intra_node_latency_s = 3e-6;
  c.inter_node_latency_s = 6e-6;
  return c;
}

/// A profile with every efficiency 1 and no overheads: times are pure roofline.
inline sim::CostProfile ideal_profile(const std::string& gpu) {
  sim::CostProfile p;
  p.name = "ideal";
  p.gpu = gpu;
  p.gemm_efficiency = 1;
  p.fp8_gemm_efficiency = 1;
  p.gemm_tile_m = 1;
  p.gemm_tile_n = 1;
  p.gemm_k_half = 0;
  p.flash_attention_forward_efficiency = 1;
  p.flash_attention_backward_efficiency = 1;
  p.flash_attention_half_efficiency_tiles = 0;
  p.sustained_compute_fraction = 1;
  p.memory_efficiency = 1;
  p.kernel_overhead_s = 0;
  p.nvlink_efficiency = 1;
  p.network_efficiency = 1;
  return p;
}

/// The 17 scalar keys every profile YAML has (each key one line), for loader tests.
inline constexpr const char* kScalarProfileYaml = R"(name: p
gpu: h100-sxm-80gb
gemm_efficiency: 0.7
fp8_gemm_efficiency: 0.6
gemm_tile_m: 128
gemm_tile_n: 128
gemm_k_half: 256
flash_attention_forward_efficiency: 0.6
flash_attention_backward_efficiency: 0.5
flash_attention_half_efficiency_tiles: 190
sustained_compute_fraction: 1.0
memory_efficiency: 0.9
kernel_overhead_s: 2.0e-6
nvlink_efficiency: 0.7
collective_launch_s: 2.6e-5
network_efficiency: 0.9
source: test
)";

}  // namespace sextant::testing
