// What the flash attention forward and backward kernels share: the padded
// shared-memory layout of their bf16 tiles and the asynchronous tile loader.
// Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/device_common.cuh"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_mma.cuh"

namespace sextant::kernels::detail::flash {

/// Rows of one m16n8k16 tile: the query rows (forward) or key rows (backward)
/// one warp owns.
inline constexpr int kWarpRows = 16;

/// Shared-memory row stride of a tile with kCols bf16 columns: 8 extra
/// elements put consecutive rows 16 bytes apart modulo the 128 bytes of the 32
/// banks, so the eight 16-byte rows one ldmatrix phase reads (plain or .trans)
/// fall in eight different bank groups, free of conflicts. Rows stay 16-byte
/// aligned for cp.async and ldmatrix.
template <int kCols>
inline constexpr int kPaddedLd = kCols + 8;

template <int kRows, int kCols>
inline constexpr std::size_t kPaddedTileElems = static_cast<std::size_t>(kRows) * kPaddedLd<kCols>;

/// Elements between consecutive tokens of q (and dq): the shape's stride, or
/// heads * head_dim when it is 0 (contiguous).
inline long long q_row_stride(const FlashAttentionShape& shape) {
  return shape.q_row_stride != 0 ? shape.q_row_stride
                                 : static_cast<long long>(shape.heads) * shape.head_dim;
}

/// As q_row_stride for k and v (and dk, dv): kv_heads * head_dim when 0.
inline long long kv_row_stride(const FlashAttentionShape& shape) {
  return shape.kv_row_stride != 0 ? shape.kv_row_stride
                                  : static_cast<long long>(shape.kv_heads) * shape.head_dim;
}

/// Key/value tokens per sequence: the shape's kv_seq, or seq when it is 0.
inline int kv_seq_of(const FlashAttentionShape& shape) {
  return shape.kv_seq != 0 ? shape.kv_seq : shape.seq;
}

/// The offset the backward kernels compare queries and keys through: query i
/// sees key j iff j <= i + offset. Causal: kv_seq - seq (bottom-right
/// alignment, kernels/flash_attention.h). Non-causal: kNonCausalOffset, past
/// every key a shape can have (kv_seq <= 65535 * 128 < 2^23, seq likewise), so
/// every comparison says "sees", no query block is masked or skipped, and
/// i + offset or j - offset stay far from int overflow. (Keys past kv_seq
/// need no mask in the backward: their K and V rows are zero-filled, so they
/// add 0 to dQ and their dK, dV rows are not stored.)
inline constexpr int kNonCausalOffset = 1 << 30;
inline int causal_offset(const FlashAttentionShape& shape) {
  return shape.causal ? kv_seq_of(shape) - shape.seq : kNonCausalOffset;
}

/// log2(e): scores are turned into log2 units so the exponentials are exp2.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.69314718055994531f;

/// Issues (does not wait for) the cp.async copies of rows [first_row,
/// first_row + kRows) of a bf16 matrix whose rows are `row_stride` elements
/// apart and kCols wide, into a (kRows, kPaddedLd<kCols>) tile; all kThreads
/// threads of the block take part. Rows at or past `seq` are zero-filled, so
/// padding rows contribute 0 * 0 to the products rather than stale values.
template <int kRows, int kCols, int kThreads>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* base,
                                                int first_row, int seq, std::size_t row_stride) {
  constexpr int kChunksPerRow = kCols / kBf16PerVector;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "every thread copies the same number of 16-byte chunks");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int chunk = static_cast<int>(threadIdx.x) + i * kThreads;
    const int row = chunk / kChunksPerRow;
    const int col = (chunk % kChunksPerRow) * kBf16PerVector;
    const int src_row = first_row + row;
    const bool valid = src_row < seq;
    cp_async_16(tile + row * kPaddedLd<kCols> + col,
                base + static_cast<std::size_t>(valid ? src_row : 0) * row_stride + col, valid);
  }
}

/// The A fragment of rows [row0, row0 + 16), columns [col0, col0 + 16) of a
/// padded row-major tile: lanes 0-15 address rows 0-15 at col0, lanes 16-31
/// the same rows at col0 + 8 (matrices a0, a1, a2, a3 in order). Also the B
/// fragments, through ldmatrix_x4_trans, of two adjacent n-tiles of a matrix
/// stored k-rows-first: r0, r1 for columns col0..+7 and r2, r3 for col0+8..+15.
template <int kCols>
__device__ __forceinline__ const __nv_bfloat16* fragment_rows(const __nv_bfloat16* tile, int row0,
                                                              int col0, int lane) {
  return tile + (row0 + lane % 16) * kPaddedLd<kCols> + col0 + (lane / 16) * 8;
}

/// The B fragments of two adjacent n-tiles when B = T^T for a row-major tile T
/// (B's n index is T's row): rows [row0, row0 + 16) and columns [col0,
/// col0 + 16) of T, through ldmatrix_x4: r0, r1 for the n-tile of rows
/// row0..+7 (k = col0..+7, col0+8..+15), r2, r3 for rows row0+8..+15.
template <int kCols>
__device__ __forceinline__ const __nv_bfloat16* transposed_b_rows(const __nv_bfloat16* tile,
                                                                  int row0, int col0, int lane) {
  return tile + (row0 + lane % 8 + (lane / 16) * 8) * kPaddedLd<kCols> + col0 +
         ((lane / 8) % 2) * 8;
}

}  // namespace sextant::kernels::detail::flash
