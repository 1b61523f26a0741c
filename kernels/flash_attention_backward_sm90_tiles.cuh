// The tile shapes of the Hopper flash attention backward
// (kernels/flash_attention_backward_sm90.cu) for each head_dim it takes, and
// what follows from them: the shared-memory layout of the main kernel and the
// order of the fp32 dQ accumulator that the main kernel adds into and the dQ
// conversion reads. Included by that file only.
//
// Every block holds 128 keys, 64 per consumer warpgroup (wgmma's M), and
// walks the query blocks; per head_dim (the file comment of
// flash_attention_backward_sm90.cu gives the reasons):
//   d = 128: 64 queries per step; the (64, 128) dQ tile split by columns,
//            warpgroup w owning columns 64w..64w+63;
//   d = 64:  128 queries per step; the (128, 64) dQ tile split by rows,
//            warpgroup w owning queries 64w..64w+63.
// Either way each consumer warpgroup's share of a step's dQ is one (64, 64)
// fp32 wgmma accumulator, and every product is an m64n64 or m64n128 wgmma.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_tensor_map.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels::detail::sm90_backward {

inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kConsumerWarpgroups = 2;
inline constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
inline constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;  // producer + consumers
inline constexpr int kWarpgroupKeys = 64;  // wgmma's M
inline constexpr int kBlockKeys = kConsumerWarpgroups * kWarpgroupKeys;
// (Q + LSE, dO + delta) slots. 3 measured 1.5 % slower than 2 at b = 4,
// h = 16, s = 2048, d = 128 (H200).
inline constexpr int kStages = 2;
// 64 bf16 = 128 bytes: one swizzled row of a panel (kernels/wgmma.cuh).
inline constexpr int kPanelCols = kTensorMapBoxCols;
inline constexpr std::uint32_t kPanelRowBytes = 128;
// A consumer warpgroup's share of a step's dQ: one m64n64 fp32 accumulator.
inline constexpr int kDqTileRows = 64;
inline constexpr int kDqTileCols = 64;
inline constexpr int kDqRegisters = kDqTileRows * kDqTileCols / kWarpgroupThreads;
inline constexpr int kDqChunks = kDqRegisters / 4;  // float4s per thread

/// The shapes that depend on head_dim (64 or 128).
template <int kHeadDim>
struct BackwardTile {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "instantiated for head_dim 64 and 128");
  // Queries per step: wgmma's N of S^T and dP^T, its K of dV and dK.
  static constexpr int kBlockQueries = kHeadDim == 128 ? 64 : 128;
  static_assert(kBlockKeys % kBlockQueries == 0, "a key block starts a query block");
  static constexpr int kPanels = kHeadDim / kPanelCols;            // of K, V, Q, dO
  static constexpr int kQueryPanels = kBlockQueries / kPanelCols;  // of dS^T
  // The step's (kBlockQueries, kHeadDim) dQ tile in (64, 64) warpgroup tiles.
  static constexpr int kDqColumnTiles = kHeadDim / kDqTileCols;
  static constexpr int kDqRowTiles = kBlockQueries / kDqTileRows;
  static_assert(kDqColumnTiles * kDqRowTiles == kConsumerWarpgroups,
                "one (64, 64) dQ tile per consumer warpgroup");
  static_assert(kDqColumnTiles == 1 || kDqRowTiles == 1,
                "the tile is split along one dimension, tile w to warpgroup w");
  static constexpr int kDqTileFloats = kBlockQueries * kHeadDim;
  static_assert(kDqChunks * 4 * kConsumerThreads == kDqTileFloats, "the fragments cover the tile");

  /// The (64, 64) dQ tile of consumer warpgroup w: its row and column in
  /// tiles, so its first query of the step is 64 dq_row_tile(w) and its first
  /// column 64 dq_col_tile(w).
  __host__ __device__ __forceinline__ static int dq_row_tile(int warpgroup) {
    return kDqRowTiles == 1 ? 0 : warpgroup;
  }
  __host__ __device__ __forceinline__ static int dq_col_tile(int warpgroup) {
    return kDqColumnTiles == 1 ? 0 : warpgroup;
  }

  /// The dQ accumulator's fragment order within a step's tile: float4 f =
  /// (warpgroup w * kDqChunks + chunk) * 128 + thread holds registers 4 chunk
  /// .. 4 chunk + 3 of thread `thread` (0..127) of consumer warpgroup w, whose
  /// (64, 64) wgmma accumulator is tile (dq_row_tile, dq_col_tile). Register
  /// 4 chunk + e is at row 16 warp + g + 8 (e / 2), column 8 chunk + 2t + e % 2
  /// of that tile (kernels/wgmma.cuh). Each warpgroup's part is contiguous
  /// (16 KiB), and the 32 lanes of a warp cover 512 contiguous bytes per chunk.
  __host__ __device__ __forceinline__ static int dq_fragment_row(int warpgroup, int thread, int e) {
    const int lane = thread % kWarpSize;
    return kDqTileRows * dq_row_tile(warpgroup) + 16 * (thread / kWarpSize) + lane / 4 + 8 * (e / 2);
  }
  __host__ __device__ __forceinline__ static int dq_fragment_col(int warpgroup, int thread,
                                                                 int chunk, int e) {
    return kDqTileCols * dq_col_tile(warpgroup) + 8 * chunk + 2 * (thread % 4) + e % 2;
  }
};

/// The main kernel's dynamic shared memory, panels of 64 bf16 columns with
/// 128 swizzled bytes per row (kernels/wgmma.cuh).
template <int kHeadDim>
struct BackwardLayout {
  using Tile = BackwardTile<kHeadDim>;
  static constexpr std::uint32_t kKvPanelBytes = kBlockKeys * kPanelRowBytes;  // (128, 64)
  static constexpr std::uint32_t kKvBytes = Tile::kPanels * kKvPanelBytes;     // (128, d): K or V
  static constexpr std::uint32_t kQPanelBytes = Tile::kBlockQueries * kPanelRowBytes;
  static constexpr std::uint32_t kQBytes = Tile::kPanels * kQPanelBytes;  // (queries, d): Q or dO
  // dS^T (128 keys, queries) bf16: panels of 128 swizzled rows, 64 queries wide.
  static constexpr std::uint32_t kDsPanelBytes = kBlockKeys * kPanelRowBytes;
  static constexpr std::uint32_t kDsBytes = Tile::kQueryPanels * kDsPanelBytes;
  static constexpr std::uint32_t kRowBytes = Tile::kBlockQueries * sizeof(float);  // LSE or delta
  static constexpr std::size_t kKOffset = 0;
  static constexpr std::size_t kVOffset = kKOffset + kKvBytes;
  static constexpr std::size_t kQOffset = kVOffset + kKvBytes;
  static constexpr std::size_t kDoOffset = kQOffset + kStages * kQBytes;
  static constexpr std::size_t kDsOffset = kDoOffset + kStages * kQBytes;
  static constexpr std::size_t kLseOffset = kDsOffset + 2 * kDsBytes;
  static constexpr std::size_t kDeltaOffset = kLseOffset + kStages * kRowBytes;
  static constexpr std::size_t kBarrierOffset = kDeltaOffset + kStages * kRowBytes;
  // The dynamic shared memory base is only 16-byte aligned; swizzled panels
  // need 1024.
  static constexpr std::size_t kBytes = kBarrierOffset + 256 + 1024;
  static_assert(kKvPanelBytes % 1024 == 0 && kQPanelBytes % 1024 == 0 && kDsPanelBytes % 1024 == 0,
                "every panel starts 1024-byte aligned");
  static_assert(kRowBytes % 16 == 0, "bulk copies move multiples of 16 bytes to 16-byte-aligned slots");
  // Compute capability 9.0's opt-in maximum per block: 227 KiB (CUDA C++
  // Programming Guide, "Technical Specifications per Compute Capability").
  static_assert(kBytes <= 227 * 1024, "does not fit in an sm_90 block's shared memory");
};

}  // namespace sextant::kernels::detail::sm90_backward
