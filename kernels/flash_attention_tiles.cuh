// What the flash attention forward and backward kernels share: the block
// shape, the padded shared-memory row strides and the tile loader. Included by
// .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/device_common.cuh"

namespace sextant::kernels::detail::flash {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kRowsPerWarp = 16;                   // one wmma tile of rows
inline constexpr int kBlockRows = kWarps * kRowsPerWarp;  // query rows per block (forward)
inline constexpr int kBlockKeys = 64;                     // keys per block
inline constexpr int kFrag = 16;                          // wmma m = n = k
static_assert(kBlockRows == kBlockKeys, "the diagonal test assumes square blocks");

// Shared-memory row strides carry 8 extra elements: rows then start 16 bytes
// apart in bank order, so the float4 reads of the lane-per-half-row layout and
// the wmma tile loads are free of bank conflicts, and every 16-row tile start
// stays 32-byte aligned as wmma requires.
template <int kHeadDim>
inline constexpr int kTileLd = kHeadDim + 8;                   // bf16, (rows, head_dim) tiles
inline constexpr int kKeyLd = kBlockKeys + 8;                  // bf16 or fp32, (rows, 64) tiles
template <int kHeadDim>
inline constexpr int kWideLd = (kHeadDim > kBlockKeys ? kHeadDim : kBlockKeys) + 8;  // fp32
template <int kHeadDim>
inline constexpr std::size_t kTileElems = static_cast<std::size_t>(kBlockRows) * kTileLd<kHeadDim>;

/// log2(e): scores are kept in log2 units so the exponentials are exp2f.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.69314718055994531f;

/// Copies rows [first_row, first_row + 64) of a (seq, row_stride) bf16 matrix
/// into a (64, kTileLd) tile; rows at or past `seq` are zero, so that padded
/// rows contribute 0 * 0 rather than 0 * (whatever was left in shared memory).
template <int kHeadDim>
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* base,
                                          int first_row, int seq, std::size_t row_stride) {
  constexpr int kVectorsPerRow = kHeadDim / kBf16PerVector;
  for (int i = threadIdx.x; i < kBlockRows * kVectorsPerRow; i += kThreads) {
    const int row = i / kVectorsPerRow;
    const int col = (i % kVectorsPerRow) * kBf16PerVector;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (first_row + row < seq)
      value = *reinterpret_cast<const uint4*>(base + (first_row + row) * row_stride + col);
    *reinterpret_cast<uint4*>(tile + row * kTileLd<kHeadDim> + col) = value;
  }
}

/// load_tile without waiting: each 16-byte piece goes global -> shared by
/// cp.async (PTX ISA, "cp.async", sm_80+), rows at or past `seq` zero-filled
/// (source size 0). The caller commits the group (cp_async_commit) and waits
/// for it (cp_async_wait) before a __syncthreads and the tile's first use.
template <int kHeadDim>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* base,
                                                int first_row, int seq, std::size_t row_stride) {
  constexpr int kVectorsPerRow = kHeadDim / kBf16PerVector;
  for (int i = threadIdx.x; i < kBlockRows * kVectorsPerRow; i += kThreads) {
    const int row = i / kVectorsPerRow;
    const int col = (i % kVectorsPerRow) * kBf16PerVector;
    const bool inside = first_row + row < seq;
    const __nv_bfloat16* src = base + (inside ? (first_row + row) * row_stride + col : 0);
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(tile + row * kTileLd<kHeadDim> + col));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(inside ? 16 : 0));
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace sextant::kernels::detail::flash
