#include "sim/compute/gemm_time.h"

#include <gtest/gtest.h>

namespace sextant::sim {
namespace {

DeviceRates rates() {
  DeviceRates r;
  r.gemm_flops_per_s = 1e15;
  r.memory_bytes_per_s = 1e14;  // high enough that the compute tests are compute bound
  r.kernel_overhead_s = 0;
  r.sm_count = 100;
  r.tile_m = 128;
  r.tile_n = 128;
  r.gemm_k_half = 0;
  return r;
}

TEST(GemmTime, FullWavesRunAtTheRate) {
  // 1280×1280 output = 10·10 tiles = one full wave of 100 SMs; k large: compute bound.
  const double m = 1280, n = 1280, k = 8192;
  EXPECT_DOUBLE_EQ(wave_efficiency(m, n, 1, rates()), 1.0);
  EXPECT_DOUBLE_EQ(gemm_time_s({m, n, k}, 1e15, rates()), 2 * m * n * k / 1e15);
}

TEST(GemmTime, PartialWaveWastesSms) {
  // 101 tiles need two waves of 100: efficiency 101/200.
  const double m = 128 * 101, n = 128;
  EXPECT_DOUBLE_EQ(wave_efficiency(m, n, 1, rates()), 101.0 / 200.0);
}

TEST(GemmTime, PartialTilesPad) {
  // 64×128 in one 128×128 tile: half of it is padding; 1 tile of 100 SMs.
  EXPECT_DOUBLE_EQ(wave_efficiency(64, 128, 1, rates()), 1.0 / 100 * 0.5);
}

TEST(GemmTime, ShortInnerDimensionSlowsByKHalf) {
  DeviceRates r = rates();
  r.gemm_k_half = 256;
  // k = 256: half the rate.
  EXPECT_DOUBLE_EQ(gemm_time_s({1280, 1280, 256}, 1e15, r), 2 * 2 * 1280.0 * 1280 * 256 / 1e15);
}

TEST(GemmTime, MemoryBoundWhenThin) {
  // m = n = 1280, k = 1: bytes 2·(1280 + 1280 + 1280²) dominate.
  const double bytes = 2.0 * (1280 + 1280 + 1280.0 * 1280);
  EXPECT_DOUBLE_EQ(gemm_time_s({1280, 1280, 1}, 1e15, rates()), bytes / 1e14);
}

TEST(GemmTime, Fp32AccumulatorMovesEightBytesPerOutput) {
  const double bytes = 2.0 * (1280 + 1280) + 8.0 * 1280 * 1280;
  EXPECT_DOUBLE_EQ(gemm_time_s({1280, 1280, 1, 1, true}, 1e15, rates()), bytes / 1e14);
}

}  // namespace
}  // namespace sextant::sim
