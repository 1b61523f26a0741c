// Interpolation of measured kernel times in log space.
//
// A kernel's time t over sizes x (GEMM: tokens, in, out; attention: batch,
// heads, seq, head_dim; element-wise: rows, width) is stored as
// y = ln(t / work), work the kernel's size product (the GEMM's m·n·k, ...):
// the log of the time per unit of work, which varies slowly with size while t
// itself spans decades. y is interpolated multilinearly in ln x over the grid
// the measured points span (every distinct measured coordinate is an axis
// value), so
//  - at a measured point the answer is the measured time exactly;
//  - on a full grid, any power law t = c·Π x_d^a_d is reproduced exactly
//    (y is then linear in ln x), and so is any constant rate (t ∝ work);
//  - calibrate's points are a log-spaced grid plus the shapes of model
//    presets, so some grid corners are unmeasured: those corners are dropped
//    and the multilinear weights of the present ones renormalised; when none
//    is measured (the query sits on an axis value only other points share),
//    y is the inverse-square-distance mean (in ln size) over all points —
//    Shepard's method, exact at points too, and only on this rare path.
// Above the largest measured size of a dimension the coordinate is held at
// that size: the time per unit of work of the largest kernels measured (they
// are saturated: a GEMM or a memory sweep twice as large takes twice as long).
// Below the smallest measured size of any dimension — where launch latency
// and idle SMs set the time — there is no coverage (std::nullopt): callers
// use the roofline there.
//
// Multilinear on a tensor grid was chosen over inverse-distance weighting of
// all points as the main path because it is exact for power laws (IDW is
// not), and a query is 2^D cell reads after D binary searches: about 0.1 µs,
// with no allocation, where IDW touches every point of the table.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <vector>

namespace sextant::sim {

class LogGridTable {
 public:
  static constexpr int kMaxDims = 4;
  static constexpr int kMaxOutputs = 5;
  /// Above this many grid cells the table is not built (no coverage anywhere).
  static constexpr std::size_t kMaxCells = std::size_t{1} << 22;

  LogGridTable() = default;
  /// `dims` sizes and `outputs` times per point, work > 0 per point.
  LogGridTable(int dims, int outputs) : dims_(dims), outputs_(outputs) {}

  /// Adds one measured point (before build()). Repeated sizes: the last wins.
  void add(const std::array<double, kMaxDims>& sizes, double work,
           const std::array<double, kMaxOutputs>& times_s);
  /// Builds the axes and the grid from the points added.
  void build();

  bool empty() const { return cells_.empty(); }

  /// Interpolated times (the first `outputs`) for `sizes` of `work`, or
  /// std::nullopt without coverage.
  std::optional<std::array<double, kMaxOutputs>> lookup(const std::array<double, kMaxDims>& sizes,
                                                        double work) const;

 private:
  struct Point {
    std::array<double, kMaxDims> log_sizes;
    std::array<double, kMaxOutputs> log_time_per_work;
  };
  int dims_ = 0;
  int outputs_ = 0;
  std::vector<Point> points_;
  std::array<std::vector<double>, kMaxDims> axes_;  // sorted distinct ln(size)
  std::array<std::size_t, kMaxDims> strides_{};
  std::vector<double> cells_;  // outputs_ per cell, NaN where unmeasured
};

}  // namespace sextant::sim
