// Log-space interpolation of measured kernel times (sim/core/log_grid_table.h),
// on synthetic tables whose exact answer is known.
#include "sim/core/log_grid_table.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sextant::sim {
namespace {

// t = 1e-12 · m^0.9 · n^1.1 · k^1.0: a power law, so ln(t / (m·n·k)) is linear in
// the log sizes and multilinear interpolation on a full grid is exact.
double power_law_s(double m, double n, double k) {
  return 1e-12 * std::pow(m, 0.9) * std::pow(n, 1.1) * k;
}

LogGridTable full_power_law_grid() {
  LogGridTable t(3, 3);
  for (double m : {1024.0, 4096.0, 16384.0})
    for (double n : {1024.0, 8192.0})
      for (double k : {512.0, 2048.0, 8192.0}) {
        const double s = power_law_s(m, n, k);
        t.add({m, n, k, 0}, m * n * k, {s, 2 * s, 3 * s});
      }
  t.build();
  return t;
}

TEST(LogGridTable, ReproducesAPowerLawBetweenGridPoints) {
  const LogGridTable t = full_power_law_grid();
  // 3000 x 3000 x 1000 lies inside every axis and on none of its values.
  const auto got = t.lookup({3000, 3000, 1000, 0}, 3000.0 * 3000 * 1000);
  ASSERT_TRUE(got);
  const double expected = 9e-3;  // 1e-12·3000^0.9·3000^1.1·1000 = 1e-12·3000²·1000 = 9 ms
  EXPECT_NEAR(power_law_s(3000, 3000, 1000), expected, 1e-15);
  EXPECT_NEAR((*got)[0] / expected, 1.0, 1e-12);
  EXPECT_NEAR((*got)[1] / expected, 2.0, 1e-12);
  EXPECT_NEAR((*got)[2] / expected, 3.0, 1e-12);
}

TEST(LogGridTable, IsExactAtMeasuredPoints) {
  LogGridTable t(2, 1);
  // Not a power law: 3 µs, 50 µs, 7 µs, 900 µs at the corners of (rows, width).
  t.add({1000, 1000, 0, 0}, 1e6, {3e-6, 0, 0});
  t.add({1000, 8000, 0, 0}, 8e6, {50e-6, 0, 0});
  t.add({8000, 1000, 0, 0}, 8e6, {7e-6, 0, 0});
  t.add({8000, 8000, 0, 0}, 64e6, {900e-6, 0, 0});
  t.build();
  EXPECT_NEAR((*t.lookup({1000, 8000, 0, 0}, 8e6))[0], 50e-6, 1e-18);  // exp(ln) round trip
  EXPECT_NEAR((*t.lookup({8000, 8000, 0, 0}, 64e6))[0], 900e-6, 1e-17);
  // Half-way in ln(rows) on the width-1000 edge: the geometric mean of the
  // time per element, 3e-12 and 7e-12/8 → sqrt(3e-12·0.875e-12) = 1.6202e-12,
  // times sqrt(1000·8000)·1000 = 2.8284e6 elements = 4.5826 µs.
  const double rows = std::sqrt(1000.0 * 8000.0);
  EXPECT_NEAR((*t.lookup({rows, 1000, 0, 0}, rows * 1000))[0], 4.58258e-6, 1e-10);
}

TEST(LogGridTable, DropsUnmeasuredCornersAndRenormalises) {
  LogGridTable t(2, 1);
  // A constant rate of 1e-12 s per element at three corners; (8000, 8000) unmeasured.
  t.add({1000, 1000, 0, 0}, 1e6, {1e-6, 0, 0});
  t.add({1000, 8000, 0, 0}, 8e6, {8e-6, 0, 0});
  t.add({8000, 1000, 0, 0}, 8e6, {8e-6, 0, 0});
  t.build();
  // Any point of the square keeps the rate: 3000·3000 elements → 9 µs.
  EXPECT_NEAR((*t.lookup({3000, 3000, 0, 0}, 9e6))[0], 9e-6, 1e-15);
  // The missing corner itself: Shepard's mean over the points, the same rate → 64 µs.
  EXPECT_NEAR((*t.lookup({8000, 8000, 0, 0}, 64e6))[0], 64e-6, 1e-15);
}

TEST(LogGridTable, ShepardMeanWhenNoCornerIsMeasured) {
  LogGridTable t(2, 1);
  // Rates 1e-12 s/element at (1000, 1000) and 4e-12 at (8000, 1000); (8000, 8000)
  // is unmeasured and is on both axes, so no grid corner of it is.
  t.add({1000, 1000, 0, 0}, 1e6, {1e-6, 0, 0});
  t.add({8000, 1000, 0, 0}, 8e6, {32e-6, 0, 0});
  t.add({1000, 8000, 0, 0}, 8e6, {8e-6, 0, 0});
  t.build();
  // Squared log distances from (8000, 8000): (1000, 1000) is 2·ln(8)² away,
  // (8000, 1000) and (1000, 8000) ln(8)² each: weights 1/2, 1, 1 (in units of
  // 1/ln(8)²) on the ln rates ln 1e-12, ln 4e-12, ln 1e-12 →
  // rate = exp((0.5·0 + 1·ln 4 + 1·0) / 2.5)·1e-12 = 4^0.4·1e-12 = 1.7411e-12;
  // times 64e6 elements = 111.43 µs.
  EXPECT_NEAR((*t.lookup({8000, 8000, 0, 0}, 64e6))[0], 111.430e-6, 1e-9);
}

TEST(LogGridTable, HoldsTheLargestSizeAndHasNoCoverageBelowTheSmallest) {
  const LogGridTable t = full_power_law_grid();
  // m = 32768 is above the largest 16384: the rate at 16384, so twice its time.
  EXPECT_NEAR((*t.lookup({32768, 1024, 512, 0}, 32768.0 * 1024 * 512))[0],
              2 * power_law_s(16384, 1024, 512), 1e-15);
  EXPECT_FALSE(t.lookup({1024, 1024, 256, 0}, 1024.0 * 1024 * 256));  // k below 512
  EXPECT_FALSE(LogGridTable(2, 1).lookup({1, 1, 0, 0}, 1));           // empty
  EXPECT_FALSE(t.lookup({0, 1024, 512, 0}, 1));                       // no size
  EXPECT_FALSE(t.lookup({std::nan(""), 1024, 512, 0}, 1));
}

}  // namespace
}  // namespace sextant::sim
