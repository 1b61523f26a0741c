// What the flash attention tests that slice and strip rows share: operand
// sizes, random operands, rows laid out as column slices of wider (fused QKV)
// rows, and the forward tolerances of tests/kernels/flash_attention_test.cc.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/flash_attention.h"
#include "tests/kernels/flash_attention_reference.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels::testing {

/// Padding columns of strided rows: would dominate any score it leaked into.
inline const Bf16 kFill = from_float(1e4f);

inline std::size_t q_elems(const FlashAttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * s.seq * s.heads * s.head_dim;
}
inline std::size_t kv_elems(const FlashAttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * reference_kv_seq(s) * s.kv_heads * s.head_dim;
}
inline std::size_t lse_elems(const FlashAttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * s.heads * s.seq;
}

/// Rows of `width` elements, `stride` apart (a stride of 0 means width).
struct StridedRows {
  int width = 0, stride = 0;
  StridedRows(int row_width, int row_stride)
      : width(row_width), stride(row_stride != 0 ? row_stride : row_width) {}
  /// The contiguous (tokens, width) `rows` as the first width columns of
  /// (tokens, stride) rows, the rest kFill.
  std::vector<Bf16> widen(const std::vector<Bf16>& rows) const {
    const std::size_t tokens = rows.size() / width;
    std::vector<Bf16> wide(tokens * stride, kFill);
    for (std::size_t t = 0; t < tokens; ++t)
      std::copy_n(rows.begin() + t * width, width, wide.begin() + t * stride);
    return wide;
  }
  std::vector<Bf16> narrow(const std::vector<Bf16>& wide) const {
    const std::size_t tokens = wide.size() / stride;
    std::vector<Bf16> rows(tokens * width);
    for (std::size_t t = 0; t < tokens; ++t)
      std::copy_n(wide.begin() + t * stride, width, rows.begin() + t * width);
    return rows;
  }
  /// How many padding columns of `wide` are no longer kFill.
  std::size_t changed_padding(const std::vector<Bf16>& wide) const {
    std::size_t changed = 0;
    for (std::size_t i = 0; i < wide.size(); ++i)
      changed += static_cast<int>(i % stride) >= width && wide[i].bits != kFill.bits;
    return changed;
  }
};

/// Q's (and dQ's) rows: q_row_stride apart.
inline StridedRows query_rows(const FlashAttentionShape& s) {
  return StridedRows(s.heads * s.head_dim, s.q_row_stride);
}
/// K's and V's (and dK's, dV's) rows: kv_row_stride apart.
inline StridedRows kv_rows(const FlashAttentionShape& s) {
  return StridedRows(s.kv_heads * s.head_dim, s.kv_row_stride);
}

inline double max_abs(const std::vector<double>& values) {
  double m = 0;
  for (double x : values) m = std::max(m, std::abs(x));
  return m;
}

/// The forward's O tolerance of tests/kernels/flash_attention_test.cc: 2^-8 max|V|.
inline double out_atol(const std::vector<double>& v) { return std::ldexp(max_abs(v), -8); }

/// Fresh N(0, 1) contiguous operands of shape `s`: Q, dO (batch, seq, heads,
/// head_dim), K, V (batch, kv_seq, kv_heads, head_dim).
struct Operands {
  std::vector<Bf16> q, k, v, dout;
};
inline Operands random_operands(const FlashAttentionShape& s, std::mt19937_64& rng) {
  Operands x;
  x.q = random_bf16(rng, q_elems(s), 0.0, 1.0);
  x.k = random_bf16(rng, kv_elems(s), 0.0, 1.0);
  x.v = random_bf16(rng, kv_elems(s), 0.0, 1.0);
  x.dout = random_bf16(rng, q_elems(s), 0.0, 1.0);
  return x;
}

/// `s` with every row contiguous: the reference's layout.
inline FlashAttentionShape contiguous(FlashAttentionShape s) {
  s.q_row_stride = 0;
  s.kv_row_stride = 0;
  return s;
}

/// Rows [first, first + count) of each head of a (heads, seq) LSE.
template <typename T>
std::vector<T> lse_rows(const std::vector<T>& lse, int heads, int seq, int first, int count) {
  std::vector<T> rows;
  for (int h = 0; h < heads; ++h)
    rows.insert(rows.end(), lse.begin() + static_cast<std::size_t>(h) * seq + first,
                lse.begin() + static_cast<std::size_t>(h) * seq + first + count);
  return rows;
}

/// x[first, first + count) as a vector.
template <typename T>
std::vector<T> slice(const std::vector<T>& x, std::size_t first, std::size_t count) {
  return std::vector<T>(x.begin() + first, x.begin() + first + count);
}

/// What a kernel result may differ from the double reference by, per element,
/// in the tests' terms: atol + rtol |reference|, rtol 1e-2.
inline void add_bound(std::vector<double>& bound, std::size_t first,
                      const std::vector<double>& atol, const std::vector<double>& reference) {
  for (std::size_t i = 0; i < atol.size(); ++i)
    bound[first + i] += atol[i] + 1e-2 * std::abs(reference[i]);
}

}  // namespace sextant::kernels::testing
