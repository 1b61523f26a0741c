// Deterministic column sums over many rows, for parameter gradients (LayerNorm
// and RMSNorm gamma/beta, GELU bias): a kernel writes one partial sum per chunk
// of kRowsPerChunk rows and column into a workspace (chunks, cols), then
// accumulate_column_partials adds the chunks, in chunk order, into the fp32
// gradient. No atomics: the same inputs give the same bits on every run.
//
// 64 rows per chunk keeps the workspace at 1/64 of the fp32 (rows, cols) it
// summarises (1/32 of the bf16 input read) while giving enough blocks to fill
// the GPU for the row counts of training (rows = micro-batch x sequence).
#pragma once

#include <cstddef>

#include "kernels/stream.h"

namespace sextant::kernels::detail {

inline constexpr int kRowsPerChunk = 64;

/// Chunks index gridDim.y, which is at most 65535.
inline constexpr int kMaxColumnPartialRows = 65535 * kRowsPerChunk;

inline int row_chunks(int rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

/// Bytes of one (chunks, cols) fp32 partial array.
inline std::size_t column_partials_bytes(int rows, int cols) {
  return static_cast<std::size_t>(row_chunks(rows)) * static_cast<std::size_t>(cols) * sizeof(float);
}

/// out[c] (+)= sum over chunk of partials[chunk * cols + c], in a fixed order:
/// added to out when `accumulate`, else written over it.
void accumulate_column_partials(const float* partials, int chunks, int cols, float* out,
                                cudaStream_t stream, bool accumulate = true);

/// Several (chunks, cols) partial arrays summed into their outputs at once (one
/// launch): the norms' backward has up to three.
struct ColumnSum {
  const float* partials = nullptr;
  float* out = nullptr;
};
inline constexpr int kMaxColumnSumsPerLaunch = 3;
void accumulate_column_partials(const ColumnSum* sums, int count, int chunks, int cols,
                                cudaStream_t stream, bool accumulate);

}  // namespace sextant::kernels::detail
