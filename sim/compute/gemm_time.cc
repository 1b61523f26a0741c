#include "sim/compute/gemm_time.h"

#include <algorithm>
#include <cmath>

namespace sextant::sim {

double wave_efficiency(double m, double n, double batch, const DeviceRates& r) {
  const double tiles = std::ceil(m / r.tile_m) * std::ceil(n / r.tile_n) * batch;
  const double waves = std::ceil(tiles / r.sm_count);
  // Tiles also pad m and n up to whole tiles: useful work / work done.
  const double padding = (m * n) / (std::ceil(m / r.tile_m) * r.tile_m *
                                     std::ceil(n / r.tile_n) * r.tile_n);
  return tiles / (waves * r.sm_count) * padding;
}

double gemm_time_s(const GemmShape& g, double flops_per_s, const DeviceRates& r) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0.0;
  const double flops = 2.0 * g.m * g.n * g.k * g.batch;
  const double k_efficiency = g.k / (g.k + r.gemm_k_half);
  const double compute_s =
      flops / (flops_per_s * k_efficiency * wave_efficiency(g.m, g.n, g.batch, r));
  const double element_bytes = r.fp8 ? 1.0 : 2.0;
  const double c_bytes = g.accumulate_fp32 ? 8.0 : 2.0;
  const double bytes = g.batch * (element_bytes * (g.m * g.k + g.k * g.n) + c_bytes * g.m * g.n);
  const double memory_s = bytes / r.memory_bytes_per_s;
  return std::max(compute_s, memory_s) + r.kernel_overhead_s;
}

}  // namespace sextant::sim
