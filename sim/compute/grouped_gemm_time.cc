#include "sim/compute/grouped_gemm_time.h"

#include <algorithm>
#include <cmath>

namespace sextant::sim {

namespace {
// Above this mean the Poisson tail is summed through its normal approximation.
constexpr double kNormalAboveMean = 30.0;
// Tail terms beyond this many standard deviations are below 1e-9.
constexpr double kTailSigmas = 6.0;

// P(M > x) for M ~ Poisson(mean), x a whole number.
double poisson_above(double mean, double x) {
  if (mean > kNormalAboveMean) {
    // Normal(mean, mean) with continuity correction: P(M >= x + 1) = P(Z > (x + 0.5 − mean)/σ).
    return 0.5 * std::erfc((x + 0.5 - mean) / std::sqrt(2.0 * mean));
  }
  // 1 − Σ_{i<=x} e^{-mean} mean^i / i!
  double term = std::exp(-mean), cdf = term;
  for (int i = 1; i <= static_cast<int>(x); ++i) {
    term *= mean / i;
    cdf += term;
  }
  return std::max(0.0, 1.0 - cdf);
}
}  // namespace

double expected_tiles_per_group(double mean, double tile) {
  if (mean <= 0) return 0.0;
  // E[ceil(M/t)] = Σ_{j≥0} P(ceil(M/t) > j) = Σ_{j≥0} P(M > j·t).
  const double last = mean + kTailSigmas * std::sqrt(mean) + 1.0;
  double tiles = 0;
  for (double j = 0; j * tile <= last; ++j) tiles += poisson_above(mean, j * tile);
  return tiles;
}

double grouped_gemm_time_s(double mean_rows, double n, double k, double groups,
                           double flops_per_s, const DeviceRates& r) {
  if (mean_rows <= 0 || n <= 0 || k <= 0 || groups <= 0) return 0.0;
  const double tiles =
      groups * expected_tiles_per_group(mean_rows, r.tile_m) * std::ceil(n / r.tile_n);
  const double waves = std::ceil(tiles / r.sm_count);
  // A wave: every SM computes one tile_m × tile_n tile over k (gemm_time.h's
  // roofline per SM, with its short-k efficiency).
  const double k_efficiency = k / (k + r.gemm_k_half);
  const double compute_s =
      waves * r.sm_count * 2.0 * r.tile_m * r.tile_n * k / (flops_per_s * k_efficiency);
  const double element_bytes = r.fp8 ? 1.0 : 2.0;
  const double bytes =
      groups * (element_bytes * (mean_rows * k + k * n) + 2.0 * mean_rows * n);
  const double memory_s = bytes / r.memory_bytes_per_s;
  return std::max(compute_s, memory_s) + r.kernel_overhead_s;
}

}  // namespace sextant::sim
