#include "sim/compute/grouped_gemm_time.h"

#include <cmath>

#include <gtest/gtest.h>

#include "sim/compute/gemm_time.h"

namespace sextant::sim {
namespace {

DeviceRates rates() {
  DeviceRates r;
  r.gemm_flops_per_s = 1e15;
  r.memory_bytes_per_s = 3e12;
  r.kernel_overhead_s = 0;
  r.sm_count = 132;
  r.tile_m = 128;
  r.tile_n = 128;
  r.gemm_k_half = 0;
  return r;
}

TEST(GroupedGemm, ExpectedTilesOfPoissonRows) {
  // Mean 1: P(M > 0) = 1 − e^{-1} = 0.632 experts have a tile; P(M > 128) ≈ 0.
  EXPECT_NEAR(expected_tiles_per_group(1.0, 128), 1 - std::exp(-1.0), 1e-12);
  // Mean 128, σ ≈ 11.3: about half the experts spill into a second tile:
  // 1 + P(M > 128) = 1 + 0.5·erfc(0.5/(√2·11.31)) = 1.4824.
  EXPECT_NEAR(expected_tiles_per_group(128.0, 128), 1.0 + 0.5 * std::erfc(0.5 / std::sqrt(256.0)),
              1e-9);
  // Mean 6336 = 49.5 tiles, σ = 80: as many experts spill into a 51st tile as
  // fit in 49, so the spread cancels: 50 tiles.
  EXPECT_NEAR(expected_tiles_per_group(6400.0 - 64, 128), 50.0, 0.01);
}

TEST(GroupedGemm, FewTokensPerExpertAreBoundByReadingTheWeights) {
  // 32 local experts of DeepSeek-V3's fc1 (7168 → 2·2048), 8 tokens each:
  // every expert's 7168·4096 bf16 weights are read once: 32·2·7168·4096 bytes
  // (plus 32·8·(7168 + 4096)·2 bytes of rows) at 3 TB/s = 0.627 ms, far above
  // the 2·256·7168·4096 FLOPs' compute.
  const double bytes = 32 * (2.0 * (8 * 7168 + 7168.0 * 4096) + 2.0 * 8 * 4096);
  EXPECT_DOUBLE_EQ(grouped_gemm_time_s(8, 4096, 7168, 32, 1e15, rates()), bytes / 3e12);
}

TEST(GroupedGemm, ManyTokensPerExpertMatchTheDenseRoofline) {
  // 4 experts of 12,800 rows each (a multiple of the tile, σ/mean < 1 %):
  // tiles = 4·100·32 = 12,800, 97 waves of 132 — the dense GEMM's count for
  // m = 12,800 in batch 4, up to the rows' spread over tile boundaries.
  const double grouped = grouped_gemm_time_s(12'800 - 64, 4096, 7168, 4, 1e15, rates());
  const double dense = gemm_time_s({12'800 - 64, 4096, 7168, 4, false}, 1e15, rates());
  EXPECT_NEAR(grouped / dense, 1.0, 1e-9);
}

}  // namespace
}  // namespace sextant::sim
