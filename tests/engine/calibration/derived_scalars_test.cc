// The scalar fields are fitted to the simulator's own formulas: tables made
// from those formulas with known constants must give the constants back.
#include "engine/calibration/derived_scalars.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/compute/gemm_time.h"

namespace sextant::engine::calibration {
namespace {

DerivationInputs h100_inputs() {
  DerivationInputs in;
  in.gpu.name = "h100-sxm-80gb";
  in.gpu.peak_bf16_flops_per_s = 989.4e12;
  in.gpu.memory_bandwidth_bytes_per_s = 3.35e12;
  in.gpu.sm_count = 132;
  in.datasheet_profile.fp8_gemm_efficiency = 0.66;
  in.datasheet_profile.nvlink_efficiency = 0.71;
  in.datasheet_profile.collective_launch_s = 26e-6;
  in.datasheet_profile.network_efficiency = 0.9;
  in.datasheet_profile_path = "configs/profiles/h100-sxm-80gb.yaml";
  return in;
}

// gemm_time_s with efficiency 0.70, 128 x 256 tiles, k_half 256, 2 us overhead.
double model_gemm_s(double m, double n, double k, bool fp32) {
  sim::DeviceRates r;
  r.sm_count = 132;
  r.tile_m = 128;
  r.tile_n = 256;
  r.gemm_k_half = 256;
  r.memory_bytes_per_s = 3.35e12;
  r.kernel_overhead_s = 2e-6;
  return sim::gemm_time_s({m, n, k, 1, fp32}, 989.4e12 * 0.70, r);
}

TEST(DerivedScalars, RecoversTheGemmConstantsOfTheSimulatorsFormula) {
  MeasuredProfile p;
  p.overheads.graph_kernel_s = 2e-6;
  for (const long long t : {512, 1536, 4096, 8192, 20000})
    for (const long long i : {256, 1024, 2048, 5000})
      for (const long long o : {384, 1024, 3072, 8192})
        p.linear_bf16.push_back({t, i, o, model_gemm_s(t, o, i, false), model_gemm_s(t, i, o, false),
                                 model_gemm_s(i, o, t, true)});
  const ProfileScalars s = derive_scalars(p, h100_inputs());
  EXPECT_NEAR(s.gemm_efficiency.value, 0.70, 1e-9);
  EXPECT_EQ(s.gemm_tile_m.value, 128);
  EXPECT_EQ(s.gemm_tile_n.value, 256);
  EXPECT_EQ(s.gemm_k_half.value, 256);
  EXPECT_NE(s.gemm_efficiency.how.find("on the 240 GEMMs of linear_bf16 (3 per row): rms log error 0.000"),
            std::string::npos)  // 5 x 4 x 4 rows x 3 products
      << s.gemm_efficiency.how;
}

// Rows that follow the flash term exactly, kv_heads = heads / kv_divisor, times x slowdown:
// forward F = b·h·4·s²·d/2 at 989.4 TF x 0.6 x u/(u + 190), u = b·h·s/128; backward 2.5 F at 0.45.
std::vector<AttentionPoint> flash_rows(int kv_divisor, double slowdown) {
  std::vector<AttentionPoint> rows;
  for (const int b : {1, 4})
    for (const int h : {8, 32})
      for (const int s : {512, 2048, 8192}) {
        const double flops = b * h * 4.0 * s * s * 128 / 2.0;
        const double u = b * h * s / 128.0;
        const double occupancy = u / (u + 190);
        rows.push_back({b, h, h / kv_divisor, s, 128, slowdown * (flops / (989.4e12 * 0.6 * occupancy) + 2e-6),
                        slowdown * (2.5 * flops / (989.4e12 * 0.45 * occupancy) + 2e-6)});
      }
  return rows;
}

TEST(DerivedScalars, RecoversTheFlashAttentionConstants) {
  MeasuredProfile p;
  p.overheads.graph_kernel_s = 2e-6;
  p.attention = flash_rows(1, 1.0);
  const ProfileScalars s = derive_scalars(p, h100_inputs());
  EXPECT_NEAR(s.flash_attention_forward_efficiency.value, 0.60, 1e-9);
  EXPECT_NEAR(s.flash_attention_backward_efficiency.value, 0.45, 1e-9);
  EXPECT_EQ(s.flash_attention_half_efficiency_tiles.value, 190);
}

// The flash term is the fallback for shapes no table covers and knows no
// key/value heads: grouped-query rows (here 3x slower) leave the fit alone.
TEST(DerivedScalars, FlashAttentionFitReadsOnlyMultiHeadRows) {
  MeasuredProfile p;
  p.overheads.graph_kernel_s = 2e-6;
  p.attention = flash_rows(1, 1.0);
  for (const AttentionPoint& a : flash_rows(4, 3.0)) p.attention.push_back(a);
  const ProfileScalars s = derive_scalars(p, h100_inputs());
  EXPECT_NEAR(s.flash_attention_forward_efficiency.value, 0.60, 1e-9);
  EXPECT_NEAR(s.flash_attention_backward_efficiency.value, 0.45, 1e-9);
  EXPECT_EQ(s.flash_attention_half_efficiency_tiles.value, 190);
  EXPECT_NE(s.flash_attention_forward_efficiency.how.find("the 12 multi-head attention rows"), std::string::npos)
      << s.flash_attention_forward_efficiency.how;
}

TEST(DerivedScalars, MemoryOverheadAndCopiedFields) {
  MeasuredProfile p;
  p.overheads.graph_kernel_s = 1.25e-6;
  // 32768 x 8192 bf16 residual add: 6 bytes per element = 1.611e9 bytes in 0.6 ms -> 2.684e12 B/s.
  p.elementwise = {{"residual_add", {{2048, 2048, 1e-5}, {32768, 8192, 0.6e-3}}}};
  const ProfileScalars s = derive_scalars(p, h100_inputs());
  EXPECT_NEAR(s.memory_efficiency.value, 6.0 * 32768 * 8192 / 0.6e-3 / 3.35e12, 1e-12);  // 0.8013
  EXPECT_EQ(s.kernel_overhead_s.value, 1.25e-6);
  EXPECT_EQ(s.sustained_compute_fraction.value, 1.0);
  EXPECT_EQ(s.fp8_gemm_efficiency.value, 0.66);
  EXPECT_EQ(s.nvlink_efficiency.value, 0.71);
  EXPECT_EQ(s.nvlink_efficiency.how,
            "not measured: copied from configs/profiles/h100-sxm-80gb.yaml (one GPU: no NCCL measured)");
  EXPECT_EQ(s.collective_launch_s.value, 26e-6);
  EXPECT_EQ(s.network_efficiency.value, 0.9);
}

TEST(DerivedScalars, NvlinkFromTheAllReduceBusBandwidth) {
  MeasuredProfile p;
  // 2 ranks, 256 MiB in 1 ms: bus bandwidth 2^28 / 1e-3 x 2·1/2 = 2.684e11 B/s; over 450e9: 0.5965.
  p.nccl.all_reduce = {{2, 4096, 20e-6}, {2, 1LL << 28, 1e-3}};
  DerivationInputs in = h100_inputs();
  in.link_bandwidth_bytes_per_s = 450e9;
  const ProfileScalars s = derive_scalars(p, in);
  EXPECT_NEAR(s.nvlink_efficiency.value, (1LL << 28) / 1e-3 / 450e9, 1e-12);
  EXPECT_EQ(s.collective_launch_s.value, 20e-6);
}

}  // namespace
}  // namespace sextant::engine::calibration
