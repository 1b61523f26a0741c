// The profile's YAML text, byte for byte, for a fixed set of rows: the
// contract with sim/'s reader (PROFILE_SCHEMA) is checked here, on the CPU.
#include "engine/calibration/profile_writer.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "sim/core/config_loader.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::calibration {
namespace {

MeasuredProfile fixed_profile() {
  MeasuredProfile p;
  p.name = "h100-sxm-80gb-measured";
  p.gpu = "h100-sxm-80gb";
  p.source = "sextant calibrate on 1 x NVIDIA H100 80GB HBM3";
  ProfileScalars& s = p.scalars;
  s.gemm_efficiency = {0.7125, "fitted"};
  s.fp8_gemm_efficiency = {0.66, "not measured: copied"};
  s.gemm_tile_m = {128, ""};
  s.gemm_tile_n = {256, ""};
  s.gemm_k_half = {96, ""};
  s.flash_attention_forward_efficiency = {0.455, ""};
  s.flash_attention_backward_efficiency = {0.38, ""};
  s.flash_attention_half_efficiency_tiles = {190, ""};
  s.sustained_compute_fraction = {1, ""};
  s.memory_efficiency = {0.9123456, ""};
  s.kernel_overhead_s = {1.5e-6, "graph"};
  s.nvlink_efficiency = {0.71, ""};
  s.collective_launch_s = {2.6e-5, ""};
  s.network_efficiency = {0.9, ""};
  Provenance& m = p.measurement;
  m.gpu_name = "NVIDIA H100 80GB HBM3";
  m.driver_version = "580.159.04";
  m.cuda_runtime_version = "13.0";
  m.cublas_version = "13.1.0";
  m.gpu_count = "1";
  m.commit = "abc1234";
  m.date = "2026-11-23";
  m.command = "sextant calibrate --out \"a b.yaml\"";
  m.method = "CUDA events";
  m.duration_s = "212";
  p.linear_bf16 = {{8192, 2048, 6144, 1.1e-4, 1.2e-4, 1.3e-4, 1.4e-4, 1.5e-4, 1.6e-4, 1.7e-4, 1.8e-4},
                   {512, 512, 512, 5.123456e-6, 6e-6, 7e-6, 8e-6, 9e-6, 1e-5, 1.1e-5, 1.2e-5}};
  p.attention = {{4, 16, 16, 2048, 128, 2.0e-4, 5.0e-4}};
  p.elementwise = {{"layernorm_forward", {{8192, 2048, 1.5e-5}}}, {"adamw", {{1, 1048576, 4e-5}}}};
  p.overheads = {2.0e-6, 1.0e-6, 1.0e-5, 1.0e-4};
  p.nccl.all_reduce = {{2, 4096, 2.5e-5}};
  return p;
}

TEST(ProfileWriter, WritesTheSchemaExactly) {
  const std::string expected =
      "# Measured cost profile (PROFILE_SCHEMA): the engine's own kernels on one GPU model.\n"
      "# All times in seconds (median of repeated CUDA-event timings), sizes in elements\n"
      "# unless a key says _bytes. Written by `sextant calibrate`; the method is under\n"
      "# measurement:.\n"
      "name: h100-sxm-80gb-measured\n"
      "gpu: h100-sxm-80gb\n"
      "software: sextant-engine\n"
      "source: \"sextant calibrate on 1 x NVIDIA H100 80GB HBM3\"\n"
      "gemm_efficiency: 0.7125  # fitted\n"
      "fp8_gemm_efficiency: 0.66  # not measured: copied\n"
      "gemm_tile_m: 128\n"
      "gemm_tile_n: 256\n"
      "gemm_k_half: 96\n"
      "flash_attention_forward_efficiency: 0.455\n"
      "flash_attention_backward_efficiency: 0.38\n"
      "flash_attention_half_efficiency_tiles: 190\n"
      "sustained_compute_fraction: 1\n"
      "memory_efficiency: 0.9123\n"  // 4 significant digits
      "kernel_overhead_s: 1.5e-06  # graph\n"
      "nvlink_efficiency: 0.71\n"
      "collective_launch_s: 2.6e-05\n"
      "network_efficiency: 0.9\n"
      "measurement:\n"
      "  gpu_name: \"NVIDIA H100 80GB HBM3\"\n"
      "  driver_version: \"580.159.04\"\n"
      "  cuda_runtime_version: \"13.0\"\n"
      "  cublas_version: \"13.1.0\"\n"
      "  nccl_version: \"\"\n"
      "  gpu_count: \"1\"\n"
      "  commit: \"abc1234\"\n"
      "  date: \"2026-11-23\"\n"
      "  command: \"sextant calibrate --out \\\"a b.yaml\\\"\"\n"  // quotes escaped
      "  method: \"CUDA events\"\n"
      "  duration_s: \"212\"\n"
      "linear_bf16:  # [tokens, in_width, out_width, forward_s, input_gradient_s, weight_gradient_s]\n"
      "  - [8192, 2048, 6144, 1.100e-04, 1.200e-04, 1.300e-04]\n"
      "  - [512, 512, 512, 5.123e-06, 6.000e-06, 7.000e-06]\n"
      "linear_fp8: []  # [tokens, in_width, out_width, forward_s, input_gradient_s, weight_gradient_s]\n"
      "linear_bf16_epilogues:  # [tokens, in_width, out_width, forward_bias_s, forward_residual_s, "
      "forward_bias_residual_s, forward_bias_gelu_s, input_gradient_dgelu_s]: the bf16 products with the engine's "
      "fused epilogues\n"
      "  - [8192, 2048, 6144, 1.400e-04, 1.500e-04, 1.600e-04, 1.700e-04, 1.800e-04]\n"
      "  - [512, 512, 512, 8.000e-06, 9.000e-06, 1.000e-05, 1.100e-05, 1.200e-05]\n"
      "attention:  # [batch, heads, seq, head_dim, forward_s, backward_s]\n"
      "  - [4, 16, 2048, 128, 2.000e-04, 5.000e-04]\n"
      "elementwise:\n"
      "  layernorm_forward:  # [rows, width, seconds]\n"
      "    - [8192, 2048, 1.500e-05]\n"
      "  adamw:  # [rows, width, seconds]\n"
      "    - [1, 1048576, 4.000e-05]\n"
      "overheads:\n"
      "  kernel_launch_s: 2.000e-06\n"
      "  graph_kernel_s: 1.000e-06\n"
      "  graph_launch_s: 1.000e-05\n"
      "  host_step_s: 1.000e-04\n"
      "nccl:\n"
      "  all_reduce:  # [ranks, bytes, seconds]\n"
      "    - [2, 4096, 2.500e-05]\n"
      "  reduce_scatter: []  # [ranks, bytes, seconds]\n"
      "  all_gather: []  # [ranks, bytes, seconds]\n"
      "  all_to_all: []  # [ranks, bytes, seconds]\n"
      "  send_recv: []  # [ranks, bytes, seconds]\n";
  EXPECT_EQ(profile_yaml(fixed_profile()), expected);
}

TEST(ProfileWriter, TextParsesBackToTheSameValues) {
  const YAML::Node y = YAML::Load(profile_yaml(fixed_profile()));
  EXPECT_EQ(y["gpu"].as<std::string>(), "h100-sxm-80gb");
  EXPECT_EQ(y["measurement"]["command"].as<std::string>(), "sextant calibrate --out \"a b.yaml\"");
  ASSERT_EQ(y["linear_bf16"].size(), 2u);
  EXPECT_EQ(y["linear_bf16"][0][2].as<long long>(), 6144);
  EXPECT_DOUBLE_EQ(y["linear_bf16"][1][3].as<double>(), 5.123e-6);  // rounded to 4 digits
  EXPECT_EQ(y["linear_fp8"].size(), 0u);
  ASSERT_EQ(y["linear_bf16_epilogues"].size(), 2u);
  EXPECT_DOUBLE_EQ(y["linear_bf16_epilogues"][0][7].as<double>(), 1.8e-4);
  EXPECT_DOUBLE_EQ(y["elementwise"]["adamw"][0][2].as<double>(), 4e-5);
  EXPECT_DOUBLE_EQ(y["gemm_tile_n"].as<double>(), 256);
  EXPECT_EQ(y["nccl"]["send_recv"].size(), 0u);
}

// Grouped-query points go to their own table, after the multi-head one, with their kv_heads.
TEST(ProfileWriter, WritesGroupedQueryAttentionApart) {
  MeasuredProfile p = fixed_profile();
  p.attention = {{1, 32, 8, 32768, 64, 1.25e-2, 4.5e-2},
                 {4, 16, 16, 2048, 128, 2.0e-4, 5.0e-4},
                 {2, 16, 2, 8192, 128, 1.0e-3, 3.0e-3}};
  const std::string yaml = profile_yaml(p);
  const std::string expected =
      "attention:  # [batch, heads, seq, head_dim, forward_s, backward_s]\n"
      "  - [4, 16, 2048, 128, 2.000e-04, 5.000e-04]\n"
      "attention_gqa:  # [batch, heads, kv_heads, seq, head_dim, forward_s, backward_s]\n"
      "  - [1, 32, 8, 32768, 64, 1.250e-02, 4.500e-02]\n"
      "  - [2, 16, 2, 8192, 128, 1.000e-03, 3.000e-03]\n"
      "elementwise:\n";
  EXPECT_NE(yaml.find(expected), std::string::npos) << yaml;
}

// The writer's text is what sim/'s reader takes: every attention row comes back
// with its kv_heads, and the simulator keeps one table per group size.
TEST(ProfileWriter, GroupedQueryAttentionRoundTripsThroughTheSimulatorsReader) {
  MeasuredProfile p = fixed_profile();
  p.attention = {{4, 16, 16, 2048, 128, 2.0e-4, 5.0e-4},
                 {1, 32, 8, 32768, 64, 1.25e-2, 4.5e-2},
                 {2, 16, 2, 8192, 128, 1.0e-3, 3.0e-3}};
  const sim::CostProfile read = sim::load_profile_text(profile_yaml(p), "written.yaml");
  ASSERT_TRUE(read.tables);
  const std::vector<sim::AttentionPoint>& a = read.tables->attention;
  ASSERT_EQ(a.size(), 3u);
  // Multi-head rows first (kv_heads = heads), then the grouped ones in the order written.
  EXPECT_EQ(a[0].heads, 16);
  EXPECT_EQ(a[0].kv_heads, 16);
  EXPECT_EQ(a[1].heads, 32);
  EXPECT_EQ(a[1].kv_heads, 8);
  EXPECT_EQ(a[1].seq, 32768);
  EXPECT_EQ(a[1].head_dim, 64);
  EXPECT_DOUBLE_EQ(a[1].forward_s, 1.25e-2);
  EXPECT_DOUBLE_EQ(a[1].backward_s, 4.5e-2);
  EXPECT_EQ(a[2].kv_heads, 2);
  EXPECT_DOUBLE_EQ(a[2].backward_s, 3.0e-3);
  // Tables for groups 1 (multi-head), 4 (32/8) and 8 (16/2).
  const auto& tables = read.tables->lookup.attention;
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_TRUE(tables.count(1) && tables.count(4) && tables.count(8));
  const auto at_point = tables.at(4).lookup({1, 32, 32768, 64}, 1.0 * 32 * 32768.0 * 32768.0 * 64);
  ASSERT_TRUE(at_point);
  EXPECT_NEAR((*at_point)[1], 4.5e-2, 1e-12 * 4.5e-2);  // the measured time at a measured point
}

TEST(ProfileWriter, WritesAtomicallyAndLeavesNoTemporaryFile) {
  sextant::testing::TempDir dir;
  const std::string path = dir.file("profile.yaml");
  write_file_atomically(path, "old\n");
  write_file_atomically(path, "new\n");
  EXPECT_EQ(sextant::testing::read_file(path), "new\n");
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);  // no profile.yaml.tmp.<pid> left behind
}

TEST(ProfileWriter, NamesThePathWhenTheFolderIsMissing) {
  try {
    write_file_atomically("/nonexistent-folder/profile.yaml", "x");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/profile.yaml: cannot create"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sextant::engine::calibration
