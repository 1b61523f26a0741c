// Flash attention backward for Hopper (sm_90a), head_dim 64 or 128, causal or
// not: the products of FlashAttention-2's backward (Dao 2023, Algorithm 2) on
// warpgroup MMA, laid out as FlashAttention-3's backward (Shah et al. 2024,
// section 3.1 and the backward pass of appendix B): each thread block owns a
// block of 128 keys, keeps K and V in shared memory, walks the query blocks
// with Q and dO arriving by TMA, keeps dK and dV in registers and adds its
// part of dQ into an fp32 buffer with atomics.
//
// Tile shapes (kernels/flash_attention_backward_sm90_tiles.cuh), after FA3's
// hopper/flash_bwd_launch_template.h (run_mha_bwd_hdim128 causal, and
// run_mha_bwd_hdim64), both with S and dP computed transposed (SdP_swapAB),
// dK and dV split by keys between the two consumer warpgroups:
//   d = 128: 64 queries x 128 keys per step; dQ split by columns (each
//            consumer warpgroup 64 of the 128).
//   d = 64:  128 queries x 128 keys per step; dQ split by queries (each
//            consumer warpgroup 64 of the 128 rows, all 64 columns), FA3's
//            AtomLayoutMdQ = 2. Half the head_dim halves every product's
//            work per query, so twice the queries keep a step's wgmma work,
//            accumulator registers (S^T and dP^T 64 each, dK, dV, dQ 32 each:
//            the same 224 per thread as d = 128's 32 + 32 + 64 + 64 + 32) and
//            dQ reductions (32 KiB a step) as at d = 128, and halve the steps
//            (mbarrier waits, named barriers, LSE and delta copies) per key
//            block. 64 queries at d = 64 would leave each warpgroup 32 dQ
//            columns: an m64n32 product whose B (K, MN-major) starts mid-way
//            through a 128-byte swizzle row, which the canonical MN-major
//            layouts (PTX ISA, "Shared Memory Matrix Layout"; 64-element
//            atoms) do not describe. Shared memory at d = 64: 163 KiB (K, V
//            16 KiB each, Q and dO 2 x 16 KiB each, dS^T 2 x 32 KiB).
//            Registers (ptxas -v, nvcc 13.0, 240 per consumer thread after
//            setmaxnreg): 16 bytes spilled at d = 64, two 8-byte local loads
//            per step beside its 40 wgmma; 8 bytes at d = 128 non-causal.
//
// Three launches:
//   1. Per (batch, head, query) row, padded to whole query blocks: delta_i =
//      dO_i . O_i (Algorithm 2, line 4, D_i = rowsum(dO_i o O_i)) and LSE_i in
//      log2 units, into the workspace; padding rows get delta 0 and LSE +inf,
//      so their probabilities are exp2(-inf) = 0. The same pass zeroes the fp32
//      dQ accumulator. (FA3's preprocessing kernel does the same, so the main
//      kernel can bulk-copy 16-byte-aligned LSE and delta blocks.)
//   2. One thread block of 3 warpgroups per block of 128 keys of one
//      key/value head, in one of two launch orders (backward_heads_outer):
//      up to s = 2048, grid (key blocks, kv_heads, batch): a head's blocks
//      are launched together, key block 0, which sees every query, first, so
//      the few heads in flight keep their Q, dO and fp32 dQ accumulator (8 s d
//      bytes a head: 2 MiB at s = 2048, d = 128) in L2 while their blocks share
//      them; for longer sequences grid (kv_heads, batch, key blocks): every
//      head's key block 0 first, so the longest blocks do not trail at the end.
//      One thread of warpgroup 0 issues the TMA copies: K and V once, then
//      Q + LSE and dO + delta of each (query head of the GQA group, query
//      block at or below the diagonal) step into kStages slots guarded by
//      mbarriers (FA3 section 3.1, warp specialization; setmaxnreg gives its
//      registers to the consumers). Consumer warpgroup w owns keys 64w..64w+63
//      and per step (n = the step's queries) computes, in the transposed
//      orientation (keys as wgmma's M), Algorithm 2 lines 9-16:
//        S^T  = K Q^T                      (64, n)  wgmma, K and Q from smem
//        dP^T = V dO^T                     (64, n)  wgmma, V and dO from smem
//        P^T  = exp2(S^T scale log2 e - LSE log2 e), causally masked (while
//               dP^T is still on the tensor cores)
//        dS^T = P^T o (dP^T - delta)
//        dV  += P^T dO                     (64, d)  wgmma, A from registers
//      (the accumulators rounded to bf16 are the A fragments, kernels/wgmma.cuh,
//      so P and dS need no trip through shared memory for dV and dK). dS^T also
//      goes to shared memory (two buffers); after a named barrier of the two
//      consumer warpgroups,
//        dQ_part = dS K                    (64, 64) warpgroup w's tile of dQ
//        dK  += dS^T Q                     (64, d)  wgmma, A from registers
//      dQ reads dS^T and K MN-major (transpose bits). Once dQ_part retires it
//      is added into the fp32 accumulator by 16-byte reductions
//      (red.global.add.v4.f32) while dK still runs.
//   3. dQ: the accumulator, times the softmax scale, to bf16.
//
// The dQ accumulator is not stored row-major: each query block is one
// contiguous (n x d) fp32 tile in the order of the consumers' accumulator
// fragments (BackwardTile::dq_fragment_row / _col), so the 32 lanes of a warp
// reduce into 512 contiguous bytes (4 full cache lines) per instruction;
// launch 3 puts the rows back in order through shared memory.
//
// With kv_seq > seq (bottom-right causal: query i sees keys j <= i + offset,
// offset = kv_seq - seq) the key blocks cover kv_seq; a key block's walk starts
// at the query block of the first query that sees its first key, and the mask
// compares each query with its key shifted by the offset (computed once), so
// only query blocks straddling the diagonal have masked entries, as when
// kv_seq == seq.
//
// Non-causal (kCausal false, a second instantiation: the causal one is
// unchanged) compares through an offset past every key (causal_offset,
// kernels/flash_attention_tiles.cuh): every key block walks every query block
// unmasked, and only warps holding keys past kv_seq mask those keys.
//
// Keys past kv_seq are zero-filled by TMA (4-D tensor maps (head_dim, heads,
// kv_seq, batch)) and masked for every real query (causal: by the diagonal;
// non-causal: explicitly, since exp2(-LSE) of a row whose scores are all below
// -88 would overflow and make NaN in dQ through inf * 0); queries past seq have Q =
// 0, dO = 0, LSE = +inf, so P = 0 and dS = 0. Neither's gradient is stored.
//
// Measured on an H200 (b = 4, h = 16, s = 2048, d = 128, all three launches):
// 455 us, 378 TFLOP/s, against 850 us for kernels/flash_attention_backward.cu's
// mma.sync kernel. Launches 1 and 3 alone took 84 us in a version that indexed
// them per element with 64-bit divisions; the per-tile grids here saved 15 us
// of that. The dQ reductions cost about 36 us (the time without them).
// d = 64 is not measured yet (tests/bench/kernels/flash_attention_bench.cc has
// its shapes).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/attention_tensor_map.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_backward_sm90_tiles.cuh"
#include "kernels/flash_attention_mma.cuh"
#include "kernels/flash_attention_tiles.cuh"
#include "kernels/wgmma.cuh"
#include "kernels/wgmma_backward.cuh"

namespace sextant::kernels::detail {
namespace {

using namespace flash;
using namespace sm90;

using namespace sm90_backward;

struct Barriers {
  std::uint64_t kv_full;           // K and V landed (TMA bytes)
  std::uint64_t q_full[kStages];   // Q and LSE of the slot's step landed
  std::uint64_t do_full[kStages];  // dO and delta landed
  std::uint64_t empty[kStages];    // every consumer warp is done with the slot
};
static_assert(sizeof(Barriers) <= 256, "the layout reserves 256 bytes for the barriers");

// The preprocessing kernel's blocks: 8 elements (16 bytes) of a row per
// thread, so 16 rows a block at d = 128 and 32 at d = 64.
constexpr int kPrepThreads = 256;
template <int kHeadDim>
constexpr int kPrepThreadsPerRow = kHeadDim / kBf16PerVector;
template <int kHeadDim>
constexpr int kPrepRows = kPrepThreads / kPrepThreadsPerRow<kHeadDim>;

// Per row (batch, head, query < padded_seq), row-major (b, h, padded_seq):
// delta = dO . O and lse_log2 = LSE * log2(e) for query < seq, 0 and +inf past
// it; the row's head_dim floats of the dQ accumulator zeroed.
// grid (padded_seq / kPrepRows, heads, batch). Each thread takes 8 elements;
// the d / 8 threads of a row are adjacent lanes of one warp.
template <int kHeadDim>
__global__ void __launch_bounds__(kPrepThreads)
    backward_sm90_prep_kernel(float* __restrict__ delta,             // (b, h, padded_seq)
                              float* __restrict__ lse_log2,          // (b, h, padded_seq)
                              float* __restrict__ dq_accum,          // (b, h, padded_seq, d), zeroed
                              const __nv_bfloat16* __restrict__ dout,  // (b, s, h, d)
                              const __nv_bfloat16* __restrict__ out,   // (b, s, h, d)
                              const float* __restrict__ lse,           // (b, h, s)
                              int seq, int padded_seq) {
  constexpr int kThreadsPerRow = kPrepThreadsPerRow<kHeadDim>;
  static_assert(kWarpSize % kThreadsPerRow == 0, "a row's threads share a warp");
  static_assert(BackwardTile<kHeadDim>::kBlockQueries % kPrepRows<kHeadDim> == 0,
                "whole blocks cover the padded rows");
  const int heads = static_cast<int>(gridDim.y);
  const int head = static_cast<int>(blockIdx.y);
  const std::size_t batch = blockIdx.z;
  const int query = static_cast<int>(blockIdx.x) * kPrepRows<kHeadDim> +
                    static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const int column = (static_cast<int>(threadIdx.x) % kThreadsPerRow) * kBf16PerVector;
  const std::size_t bh = batch * heads + head;
  const std::size_t row = bh * padded_seq + query;
  const bool valid = query < seq;
  float sum = 0.f;
  if (valid) {
    const std::size_t element = ((batch * seq + query) * heads + head) * kHeadDim + column;
    float a[8], b[8];
    load_bf16x8(dout + element, a);
    load_bf16x8(out + element, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += a[i] * b[i];
  }
  auto* zero = reinterpret_cast<float4*>(dq_accum + row * kHeadDim + column);
  zero[0] = make_float4(0.f, 0.f, 0.f, 0.f);
  zero[1] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int offset = kThreadsPerRow / 2; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (column == 0) {
    delta[row] = valid ? sum : 0.f;
    lse_log2[row] = valid ? lse[bh * seq + query] * kLog2e : INFINITY;
  }
}

// The device code exists only in the sm_90a pass; the sm_80 and compute_90
// passes compile an empty kernel, which the dispatch never launches.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int kConsumerWarps = kConsumerThreads / kWarpSize;
// Named barrier of the two consumer warpgroups (0 is __syncthreads).
constexpr std::uint32_t kDsBarrier = 1;
// Register budgets after setmaxnreg, as kernels/flash_attention_sm90.cu's:
// 128 * 24 + 256 * 240 = 64512 of the SM's 65536.
constexpr int kProducerRegisters = 24;
constexpr int kConsumerRegisters = 240;

// n = BackwardTile::kBlockQueries, the queries of a step (64 or 128).
struct Shared {
  unsigned char* k;   // (128 keys, d): kPanels panels of (128, 64)
  unsigned char* v;   // (128 keys, d)
  unsigned char* q;   // kStages x (n queries, d): kPanels panels of (n, 64)
  unsigned char* dO;  // kStages x (n queries, d)
  unsigned char* ds;  // 2 x dS^T (128 keys, n queries): kQueryPanels panels of (128, 64)
  float* lse_log2;    // kStages x n
  float* delta;       // kStages x n
  Barriers* barriers;
};

/// What one block walks: step i is query block first_query_block + i %
/// blocks_per_head of query head kv_head * group + i / blocks_per_head.
/// `offset` = causal_offset: query i sees key j iff i >= j - offset.
template <int kBlockQueries>
struct Walk {
  int batch, kv_head, group, first_key, offset, first_query_block, blocks_per_head, steps;
  __device__ __forceinline__ int head(int step) const {
    return kv_head * group + step / blocks_per_head;
  }
  __device__ __forceinline__ int first_query(int step) const {
    return (first_query_block + step % blocks_per_head) * kBlockQueries;
  }
};

/// The producer: one thread issuing every copy of this block. Every TMA box
/// is counted whole on its barrier, rows past seq or kv_seq included
/// (zero-filled).
template <int kHeadDim>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* do_map,
                                        const CUtensorMap* k_map, const CUtensorMap* v_map,
                                        const float* lse_log2, const float* delta,
                                        const Shared& sh,
                                        const Walk<BackwardTile<kHeadDim>::kBlockQueries>& walk,
                                        int heads, int padded_seq) {
  using Layout = BackwardLayout<kHeadDim>;
  constexpr int kPanels = BackwardTile<kHeadDim>::kPanels;
  constexpr int kBlockQueries = BackwardTile<kHeadDim>::kBlockQueries;
  Barriers* bar = sh.barriers;
  tma_prefetch_map(q_map);
  tma_prefetch_map(do_map);
  tma_prefetch_map(k_map);
  tma_prefetch_map(v_map);
  mbarrier_arrive_expect_tx(&bar->kv_full, 2 * Layout::kKvBytes);
#pragma unroll
  for (int p = 0; p < kPanels; ++p) {
    tma_load_4d(sh.k + p * Layout::kKvPanelBytes, k_map, &bar->kv_full, p * kPanelCols,
                walk.kv_head, walk.first_key, walk.batch);
    tma_load_4d(sh.v + p * Layout::kKvPanelBytes, v_map, &bar->kv_full, p * kPanelCols,
                walk.kv_head, walk.first_key, walk.batch);
  }
  for (int step = 0; step < walk.steps; ++step) {
    const int stage = step % kStages;
    mbarrier_wait(&bar->empty[stage], ((step / kStages) & 1) ^ 1);
    const int head = walk.head(step);
    const int first_query = walk.first_query(step);
    const std::size_t row =
        (static_cast<std::size_t>(walk.batch) * heads + head) * padded_seq + first_query;
    mbarrier_arrive_expect_tx(&bar->q_full[stage], Layout::kQBytes + Layout::kRowBytes);
#pragma unroll
    for (int p = 0; p < kPanels; ++p)
      tma_load_4d(sh.q + stage * Layout::kQBytes + p * Layout::kQPanelBytes, q_map,
                  &bar->q_full[stage], p * kPanelCols, head, first_query, walk.batch);
    bulk_load(sh.lse_log2 + stage * kBlockQueries, lse_log2 + row, Layout::kRowBytes,
              &bar->q_full[stage]);
    mbarrier_arrive_expect_tx(&bar->do_full[stage], Layout::kQBytes + Layout::kRowBytes);
#pragma unroll
    for (int p = 0; p < kPanels; ++p)
      tma_load_4d(sh.dO + stage * Layout::kQBytes + p * Layout::kQPanelBytes, do_map,
                  &bar->do_full[stage], p * kPanelCols, head, first_query, walk.batch);
    bulk_load(sh.delta + stage * kBlockQueries, delta + row, Layout::kRowBytes,
              &bar->do_full[stage]);
  }
}

/// Byte offset of k-step kk (16 columns) in a K-major operand of kPanels
/// panels `panel_bytes` apart: panel kk / 4, 32 bytes per step within it.
__device__ __forceinline__ std::uint32_t k_major_step(int kk, std::uint32_t panel_bytes) {
  return (kk / 4) * panel_bytes + (kk % 4) * 32;
}

/// Byte offset of k-step kk (16 rows) in an MN-major operand: 16 swizzled rows.
__device__ __forceinline__ std::uint32_t mn_major_step(int kk) { return kk * 16 * kPanelRowBytes; }

/// A consumer warpgroup: keys 64w..64w+63 of the block.
template <int kHeadDim, bool kCausal>
__device__ __forceinline__ void consume(const Shared& sh,
                                        const Walk<BackwardTile<kHeadDim>::kBlockQueries>& walk,
                                        __nv_bfloat16* __restrict__ dk,
                                        __nv_bfloat16* __restrict__ dv,
                                        float* __restrict__ dq_accum, int kv_seq, int heads,
                                        int padded_seq, long long kv_row_stride, float scale,
                                        float scale_log2) {
  using L = BackwardLayout<kHeadDim>;
  using Tile = BackwardTile<kHeadDim>;
  constexpr int kBlockQueries = Tile::kBlockQueries;
  constexpr int kDSteps = kHeadDim / 16;          // k-steps of S^T and dP^T
  constexpr int kQuerySteps = kBlockQueries / 16;  // k-steps of dV and dK
  constexpr int kKeySteps = kBlockKeys / 16;       // k-steps of dQ
  constexpr int kTileRegisters = kWarpgroupKeys * kBlockQueries / kWarpgroupThreads;  // S^T, dP^T
  constexpr int kKvRegisters = kWarpgroupKeys * kHeadDim / kWarpgroupThreads;         // dK, dV
  Barriers* bar = sh.barriers;
  const int consumer = static_cast<int>(threadIdx.x) - kWarpgroupThreads;  // 0..255
  const int warpgroup = consumer / kWarpgroupThreads;
  const int warp = (consumer % kWarpgroupThreads) / kWarpSize;
  const int lane = consumer % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int wg_first_key = walk.first_key + warpgroup * kWarpgroupKeys;
  // The first query that sees the warpgroup's first key (may be negative).
  const int wg_first_query = wg_first_key - walk.offset;

  // K, V as A (64 keys of this warpgroup, K-major); Q, dO as B of S^T, dP^T
  // (K-major, N = n rows of one panel) and of dK, dV (MN-major, panels
  // kQPanelBytes apart along N = d); for this warpgroup's (64, 64) tile of dQ,
  // dS^T as the MN-major A (the panel of its 64 queries) and K as the MN-major
  // B (the panel of its 64 columns) (kernels/wgmma.cuh).
  const std::uint64_t k_a = make_smem_descriptor(
      sh.k + warpgroup * kWarpgroupKeys * kPanelRowBytes, 16, 1024, Swizzle::k128B);
  const std::uint64_t v_a = make_smem_descriptor(
      sh.v + warpgroup * kWarpgroupKeys * kPanelRowBytes, 16, 1024, Swizzle::k128B);
  const std::uint64_t q_k_major = make_smem_descriptor(sh.q, 16, 1024, Swizzle::k128B);
  const std::uint64_t do_k_major = make_smem_descriptor(sh.dO, 16, 1024, Swizzle::k128B);
  const std::uint64_t q_mn_major = make_smem_descriptor(sh.q, L::kQPanelBytes, 1024, Swizzle::k128B);
  const std::uint64_t do_mn_major =
      make_smem_descriptor(sh.dO, L::kQPanelBytes, 1024, Swizzle::k128B);
  static_assert(kDqTileRows == kPanelCols && kDqTileCols == kPanelCols, "a dQ tile is one panel wide");
  const std::uint64_t ds_a =
      make_smem_descriptor(sh.ds + Tile::dq_row_tile(warpgroup) * L::kDsPanelBytes,
                           L::kDsPanelBytes, 1024, Swizzle::k128B);
  const std::uint64_t k_b =
      make_smem_descriptor(sh.k + Tile::dq_col_tile(warpgroup) * L::kKvPanelBytes,
                           L::kKvPanelBytes, 1024, Swizzle::k128B);

  float dk_acc[kKvRegisters], dv_acc[kKvRegisters];
#pragma unroll
  for (int i = 0; i < kKvRegisters; ++i) dk_acc[i] = dv_acc[i] = 0.f;
  float s[kTileRegisters], dp[kTileRegisters], dq[kDqRegisters];
  std::uint32_t p_frag[kQuerySteps][4], ds_frag[kQuerySteps][4];

  mbarrier_wait(&bar->kv_full, 0);
  for (int step = 0; step < walk.steps; ++step) {
    const int stage = step % kStages;
    const std::uint32_t parity = (step / kStages) & 1;
    const int first_query = walk.first_query(step);
    unsigned char* ds_tile = sh.ds + (step % 2) * L::kDsBytes;
    // S^T = K Q^T and dP^T = V dO^T.
    mbarrier_wait(&bar->q_full[stage], parity);
    wgmma_fence_operand(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk)
      wgmma_m64k16_ss<kBlockQueries, false, false>(
          s, advance_descriptor(k_a, k_major_step(kk, L::kKvPanelBytes)),
          advance_descriptor(q_k_major, stage * L::kQBytes + k_major_step(kk, L::kQPanelBytes)),
          kk > 0);
    wgmma_commit_group();
    wgmma_fence_operand(s);
    mbarrier_wait(&bar->do_full[stage], parity);
    wgmma_fence_operand(dp);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk)
      wgmma_m64k16_ss<kBlockQueries, false, false>(
          dp, advance_descriptor(v_a, k_major_step(kk, L::kKvPanelBytes)),
          advance_descriptor(do_k_major, stage * L::kQBytes + k_major_step(kk, L::kQPanelBytes)),
          kk > 0);
    wgmma_commit_group();
    wgmma_fence_operand(dp);

    // Register 4i + e: key wg_first_key + 16 warp + g + 8 (e / 2), seen first
    // by query row_query + 8 (e / 2); query first_query + 8i + 2t + e % 2
    // (kernels/wgmma.cuh).
    const float* lse_stage = sh.lse_log2 + stage * kBlockQueries;
    const float* delta_stage = sh.delta + stage * kBlockQueries;
    const int row_query = wg_first_query + 16 * warp + g;
    const bool needs_mask = first_query < wg_first_query + kWarpgroupKeys - 1;
    // Non-causal: the warp holds keys past kv_seq (the last key block's).
    const int warp_first_key = wg_first_key + 16 * warp;
    const bool past_kv_seq = !kCausal && warp_first_key + 16 > kv_seq;
    wgmma_wait_group<1>();  // S^T retired; dP^T may still run
    wgmma_fence_operand(s);
#pragma unroll
    for (int i = 0; i < kTileRegisters / 4; ++i) {
      const float2 lse2 = *reinterpret_cast<const float2*>(lse_stage + 8 * i + 2 * t);
      const float lse_col[2] = {lse2.x, lse2.y};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = fast_exp2(fmaf(s[4 * i + e], scale_log2, -lse_col[e % 2]));
        if (needs_mask && first_query + 8 * i + 2 * t + e % 2 < row_query + 8 * (e / 2))
          p = 0.f;  // the query precedes the key
        if constexpr (!kCausal)
          if (past_kv_seq && warp_first_key + g + 8 * (e / 2) >= kv_seq) p = 0.f;
        s[4 * i + e] = p;
      }
    }
    wgmma_wait_group<0>();
    wgmma_fence_operand(dp);
#pragma unroll
    for (int i = 0; i < kTileRegisters / 4; ++i) {
      const float2 delta2 = *reinterpret_cast<const float2*>(delta_stage + 8 * i + 2 * t);
      const float delta_col[2] = {delta2.x, delta2.y};
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[4 * i + e] = s[4 * i + e] * (dp[4 * i + e] - delta_col[e % 2]);
    }
    // A fragments of k-step kk (queries 16kk..): r = pack(x[8kk + 2r], x[8kk + 2r + 1]).
#pragma unroll
    for (int kk = 0; kk < kQuerySteps; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        p_frag[kk][r] = pack_bf16(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
        ds_frag[kk][r] = pack_bf16(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
      }
    // dS^T to shared memory for dQ: fragment r of k-step kk is key row
    // 16 warp + g + 8 (r % 2) of the warpgroup, queries 16kk + 8 (r / 2) + 2t
    // and + 1: column 16 (kk % 4) + 8 (r / 2) + 2t of panel kk / 4. 4-byte
    // stores; for each (kk, r) the 8 rows g land in 8 different 16-byte
    // chunks (the swizzle XORs the chunk with the row) and the 4 lanes t in
    // its 4 words: the 32 lanes on 32 banks.
    static_assert(kPanelCols % 16 == 0, "a k-step's 16 queries lie in one panel");
#pragma unroll
    for (int kk = 0; kk < kQuerySteps; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = warpgroup * kWarpgroupKeys + 16 * warp + g + 8 * (r % 2);
        const int col = 16 * (kk % 4) + 8 * (r / 2) + 2 * t;
        *reinterpret_cast<std::uint32_t*>(ds_tile + (kk / 4) * L::kDsPanelBytes +
                                          sw128_offset_bytes(row, 2 * col)) = ds_frag[kk][r];
      }
    fence_proxy_async_shared();  // the generic-proxy stores before wgmma reads them

    // dV += P^T dO.
    wgmma_fence_operand(dv_acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kQuerySteps; ++kk)
      wgmma_m64k16_rs<kHeadDim, true>(
          dv_acc, p_frag[kk],
          advance_descriptor(do_mn_major, stage * L::kQBytes + mn_major_step(kk)), true);
    wgmma_commit_group();
    wgmma_fence_operand(dv_acc);

    // Both warpgroups' rows of dS^T are in place. (dS^T has two buffers: a
    // warpgroup writes this one again two steps on, after the next barrier,
    // which the other passes only once its dQ wgmma reading it retired.)
    named_barrier_sync(kDsBarrier, kConsumerThreads);
    // dQ (this warpgroup's (64, 64) tile) = dS K: M = 64 queries, N = 64
    // columns, K = 128 keys; then dK += dS^T Q.
    wgmma_fence_operand(dq);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeySteps; ++kk)
      wgmma_m64k16_ss<kDqTileCols, true, true>(
          dq, advance_descriptor(ds_a, (step % 2) * L::kDsBytes + mn_major_step(kk)),
          advance_descriptor(k_b, mn_major_step(kk)), kk > 0);
    wgmma_commit_group();
    wgmma_fence_operand(dq);
    wgmma_fence_operand(dk_acc);
#pragma unroll
    for (int kk = 0; kk < kQuerySteps; ++kk)
      wgmma_m64k16_rs<kHeadDim, true>(
          dk_acc, ds_frag[kk],
          advance_descriptor(q_mn_major, stage * L::kQBytes + mn_major_step(kk)), true);
    wgmma_commit_group();
    wgmma_fence_operand(dk_acc);
    wgmma_wait_group<1>();  // dV and dQ retired; dK may still run
    wgmma_fence_operand(dq);
    wgmma_fence_operand(dv_acc);
    wgmma_fence_operand(p_frag);

    // This warpgroup's (64, 64) part of the step's tile, 16-byte reductions,
    // each warp's 32 lanes on 512 contiguous bytes (BackwardTile's fragment
    // order).
    float4* dq_tile = reinterpret_cast<float4*>(
                          dq_accum + ((static_cast<std::size_t>(walk.batch) * heads +
                                       walk.head(step)) * padded_seq + first_query) * kHeadDim) +
                      warpgroup * kDqChunks * kWarpgroupThreads + consumer % kWarpgroupThreads;
#pragma unroll
    for (int i = 0; i < kDqChunks; ++i)
      atomicAdd(dq_tile + i * kWarpgroupThreads,
                make_float4(dq[4 * i], dq[4 * i + 1], dq[4 * i + 2], dq[4 * i + 3]));
    // dK retired: it ran while the reductions were issued (waiting for it
    // before them measured 3 % slower at b = 4, h = 16, s = 2048, H200).
    wgmma_wait_group<0>();
    wgmma_fence_operand(ds_frag);
    wgmma_fence_operand(dk_acc);
    if (lane == 0) mbarrier_arrive(&bar->empty[stage]);  // the slot is free
  }

  // dK (times the softmax scale) and dV, keys wg_first_key + 16 warp + g and + 8.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = wg_first_key + 16 * warp + g + 8 * r;
    if (key >= kv_seq) continue;
    const std::size_t offset = (static_cast<std::size_t>(walk.batch) * kv_seq + key) * kv_row_stride +
                               static_cast<std::size_t>(walk.kv_head) * kHeadDim + 2 * t;
#pragma unroll
    for (int i = 0; i < kHeadDim / 8; ++i) {
      *reinterpret_cast<std::uint32_t*>(dk + offset + 8 * i) =
          pack_bf16(dk_acc[4 * i + 2 * r] * scale, dk_acc[4 * i + 2 * r + 1] * scale);
      *reinterpret_cast<std::uint32_t*>(dv + offset + 8 * i) =
          pack_bf16(dv_acc[4 * i + 2 * r], dv_acc[4 * i + 2 * r + 1]);
    }
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid: (key blocks, kv_heads, batch) when heads_outer, else (kv_heads, batch,
// key blocks); block: kThreads.
template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
    flash_attention_backward_sm90_kernel(const __grid_constant__ CUtensorMap q_map,
                                         const __grid_constant__ CUtensorMap do_map,
                                         const __grid_constant__ CUtensorMap k_map,
                                         const __grid_constant__ CUtensorMap v_map,
                                         __nv_bfloat16* __restrict__ dk,  // (b*kv_seq, kv_row_stride)
                                         __nv_bfloat16* __restrict__ dv,  // (b*kv_seq, kv_row_stride)
                                         float* __restrict__ dq_accum,  // (b, h, padded_seq / 64) tiles
                                         const float* __restrict__ lse_log2,  // (b, h, padded_seq)
                                         const float* __restrict__ delta,     // (b, h, padded_seq)
                                         int kv_seq, int offset, int padded_seq, int heads,
                                         int kv_heads, long long kv_row_stride, float scale,
                                         float scale_log2,
                                         bool heads_outer) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = BackwardLayout<kHeadDim>;
  constexpr int kBlockQueries = BackwardTile<kHeadDim>::kBlockQueries;
  extern __shared__ unsigned char shared_raw[];
  unsigned char* base = shared_raw + ((1024 - (shared_u32(shared_raw) & 1023)) & 1023);
  const Shared sh{base + L::kKOffset,
                  base + L::kVOffset,
                  base + L::kQOffset,
                  base + L::kDoOffset,
                  base + L::kDsOffset,
                  reinterpret_cast<float*>(base + L::kLseOffset),
                  reinterpret_cast<float*>(base + L::kDeltaOffset),
                  reinterpret_cast<Barriers*>(base + L::kBarrierOffset)};
  Walk<kBlockQueries> walk;
  walk.kv_head = static_cast<int>(heads_outer ? blockIdx.y : blockIdx.x);
  walk.batch = static_cast<int>(heads_outer ? blockIdx.z : blockIdx.y);
  walk.group = heads / kv_heads;
  walk.first_key = static_cast<int>(heads_outer ? blockIdx.x : blockIdx.z) * kBlockKeys;
  walk.offset = offset;
  walk.first_query_block = max(walk.first_key - walk.offset, 0) / kBlockQueries;
  walk.blocks_per_head = padded_seq / kBlockQueries - walk.first_query_block;
  walk.steps = walk.group * walk.blocks_per_head;
  if (threadIdx.x == 0) {
    Barriers* bar = sh.barriers;
    mbarrier_init(&bar->kv_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&bar->q_full[s], 1);
      mbarrier_init(&bar->do_full[s], 1);
      mbarrier_init(&bar->empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < kWarpgroupThreads) {
    setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == 0)
      produce<kHeadDim>(&q_map, &do_map, &k_map, &v_map, lse_log2, delta, sh, walk, heads,
                        padded_seq);
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();
  consume<kHeadDim, kCausal>(sh, walk, dk, dv, dq_accum, kv_seq, heads, padded_seq, kv_row_stride, scale, scale_log2);
#endif
}

constexpr int kConvertThreads = 256;
// Row stride of the convert kernel's fp32 tile: d + 8 (136 or 72, both 8
// modulo the 32 banks) puts the rows g of a half-warp's float2 stores
// (columns 2t, 2t + 1) on distinct 8-bank groups, and keeps rows 16-byte
// aligned for the float4 reads.
template <int kHeadDim>
constexpr int kConvertLd = kHeadDim + 8;

// dQ of one (n queries, d) tile: the accumulator's fragment order read
// coalesced into a row-major shared tile, then each row written as 16-byte
// chunks of bf16, times the softmax scale, for query < seq.
// grid (padded_seq / n, heads, batch).
template <int kHeadDim>
__global__ void __launch_bounds__(kConvertThreads)
    backward_sm90_dq_kernel(__nv_bfloat16* __restrict__ dq,        // (b*s, q_row_stride)
                            const float* __restrict__ dq_accum,    // (b, h, padded_seq / n) tiles
                            int seq, int padded_seq, long long q_row_stride, float scale) {
  using Tile = BackwardTile<kHeadDim>;
  constexpr int kBlockQueries = Tile::kBlockQueries;
  constexpr int kTileFloat4s = Tile::kDqTileFloats / 4;
  constexpr int kChunksPerRow = kHeadDim / kBf16PerVector;
  static_assert(kTileFloat4s % kConvertThreads == 0, "whole float4s per thread");
  static_assert(kBlockQueries * kChunksPerRow % kConvertThreads == 0, "whole chunks per thread");
  __shared__ __align__(16) float tile[kBlockQueries][kConvertLd<kHeadDim>];
  const int heads = static_cast<int>(gridDim.y);
  const int head = static_cast<int>(blockIdx.y);
  const std::size_t batch = blockIdx.z;
  const int first_query = static_cast<int>(blockIdx.x) * kBlockQueries;
  const float4* src = reinterpret_cast<const float4*>(
      dq_accum + ((batch * heads + head) * padded_seq + first_query) * kHeadDim);
#pragma unroll
  for (int j = 0; j < kTileFloat4s / kConvertThreads; ++j) {
    const int f = j * kConvertThreads + static_cast<int>(threadIdx.x);
    const float4 x = src[f];
    const int warpgroup = f / (kDqChunks * kWarpgroupThreads);
    const int chunk = (f / kWarpgroupThreads) % kDqChunks;
    const int thread = f % kWarpgroupThreads;
    const int row = Tile::dq_fragment_row(warpgroup, thread, 0);  // and row + 8: registers 2, 3
    const int col = Tile::dq_fragment_col(warpgroup, thread, chunk, 0);
    *reinterpret_cast<float2*>(&tile[row][col]) = make_float2(x.x, x.y);
    *reinterpret_cast<float2*>(&tile[row + 8][col]) = make_float2(x.z, x.w);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kBlockQueries * kChunksPerRow / kConvertThreads; ++j) {
    const int c = j * kConvertThreads + static_cast<int>(threadIdx.x);
    const int row = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * kBf16PerVector;
    const int query = first_query + row;
    if (query >= seq) continue;
    const float4 a = *reinterpret_cast<const float4*>(&tile[row][col]);
    const float4 b = *reinterpret_cast<const float4*>(&tile[row][col + 4]);
    const float x[8] = {a.x * scale, a.y * scale, a.z * scale, a.w * scale,
                        b.x * scale, b.y * scale, b.z * scale, b.w * scale};
    store_bf16x8(dq + (batch * seq + query) * q_row_stride +
                     static_cast<std::size_t>(head) * kHeadDim + col,
                 x);
  }
}

/// The launch order of the main kernel (file comment, launch 2), measured on an
/// H100 with flash_attention_bench (d = 128, causal, all three launches;
/// reports/measurements/2026-11-22-h100-engine-session4): heads outer took b8
/// s1024 from 505 to 330 us and b4 s2048 from 604 to 486 us, but b2 s4096 from
/// 760 to 793 and b1 s8192 from 1335 to 1412.
bool backward_heads_outer(const FlashAttentionShape& shape) { return shape.seq <= 2048; }

/// Queries per step of the head_dim's instantiation (64 or 128).
int block_queries_of(const FlashAttentionShape& shape) {
  return shape.head_dim == 64 ? BackwardTile<64>::kBlockQueries : BackwardTile<128>::kBlockQueries;
}

/// seq rounded up to whole query blocks.
long long padded_seq_of(const FlashAttentionShape& shape) {
  const long long n = block_queries_of(shape);
  return (static_cast<long long>(shape.seq) + n - 1) / n * n;
}

/// The three launches at head_dim kHeadDim (file comment).
template <int kHeadDim>
void launch_backward_sm90(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q,
                          const Bf16* k, const Bf16* v, const Bf16* out, const float* lse,
                          const FlashAttentionShape& shape, void* workspace, cudaStream_t stream) {
  using L = BackwardLayout<kHeadDim>;
  constexpr int kBlockQueries = BackwardTile<kHeadDim>::kBlockQueries;
  const int padded_seq = static_cast<int>(padded_seq_of(shape));
  const long long rows = static_cast<long long>(shape.batch) * shape.heads * padded_seq;
  auto* dq_accum = static_cast<float*>(workspace);
  float* delta = dq_accum + rows * kHeadDim;
  float* lse_log2 = delta + rows;

  const dim3 prep_grid(padded_seq / kPrepRows<kHeadDim>, shape.heads, shape.batch);
  backward_sm90_prep_kernel<kHeadDim><<<prep_grid, kPrepThreads, 0, stream>>>(
      delta, lse_log2, dq_accum, cuda_bf16(dout), cuda_bf16(out), lse, shape.seq, padded_seq);
  SEXTANT_CHECK_LAUNCH("backward_sm90_prep_kernel");

  const CUtensorMap q_map = make_attention_tensor_map(q, kHeadDim, shape.heads, shape.seq, shape.batch,
                                            q_row_stride(shape), kBlockQueries);
  const CUtensorMap do_map =
      make_attention_tensor_map(dout, kHeadDim, shape.heads, shape.seq, shape.batch,
                      static_cast<long long>(shape.heads) * kHeadDim, kBlockQueries);
  const int kv_seq = kv_seq_of(shape);
  const CUtensorMap k_map = make_attention_tensor_map(k, kHeadDim, shape.kv_heads, kv_seq, shape.batch,
                                            kv_row_stride(shape), kBlockKeys);
  const CUtensorMap v_map = make_attention_tensor_map(v, kHeadDim, shape.kv_heads, kv_seq, shape.batch,
                                            kv_row_stride(shape), kBlockKeys);
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  const auto kernel = shape.causal ? flash_attention_backward_sm90_kernel<kHeadDim, true>
                                   : flash_attention_backward_sm90_kernel<kHeadDim, false>;
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(L::kBytes)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  const int key_blocks = (kv_seq + kBlockKeys - 1) / kBlockKeys;
  const bool heads_outer = backward_heads_outer(shape);
  const dim3 grid = heads_outer ? dim3(key_blocks, shape.kv_heads, shape.batch)
                                : dim3(shape.kv_heads, shape.batch, key_blocks);
  kernel<<<grid, kThreads, L::kBytes, stream>>>(
      q_map, do_map, k_map, v_map, cuda_bf16(dk), cuda_bf16(dv), dq_accum, lse_log2, delta,
      kv_seq, causal_offset(shape), padded_seq, shape.heads, shape.kv_heads, kv_row_stride(shape),
      static_cast<float>(scale), static_cast<float>(scale * 1.4426950408889634),  // log2(e) / sqrt(d)
      heads_outer);
  SEXTANT_CHECK_LAUNCH("flash_attention_backward_sm90_kernel");

  const dim3 convert_grid(padded_seq / kBlockQueries, shape.heads, shape.batch);
  backward_sm90_dq_kernel<kHeadDim><<<convert_grid, kConvertThreads, 0, stream>>>(
      cuda_bf16(dq), dq_accum, shape.seq, padded_seq, q_row_stride(shape), static_cast<float>(scale));
  SEXTANT_CHECK_LAUNCH("backward_sm90_dq_kernel");
}

}  // namespace

// Declared in kernels/flash_attention_backward.cu, which dispatches here.
bool flash_attention_backward_sm90_supports(const FlashAttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128) return false;
  // Grid y and z dimensions (at most 65535) hold two of heads, batch and key blocks.
  const long long kv_seq = kv_seq_of(shape);
  if (shape.heads > 65535 || shape.batch > 65535 || (kv_seq + kBlockKeys - 1) / kBlockKeys > 65535)
    return false;
  // TMA strides must be below 2^40 bytes: the batch strides span seq rows of Q
  // and dO, kv_seq of K and V (non-causal kv_seq may be below seq).
  const long long widest = std::max({q_row_stride(shape), kv_row_stride(shape),
                                     static_cast<long long>(shape.heads) * shape.head_dim});
  const long long longest = std::max<long long>(shape.seq, kv_seq);
  return widest * static_cast<long long>(sizeof(__nv_bfloat16)) * longest < (1LL << 40);
}

std::size_t flash_attention_backward_sm90_workspace_bytes(const FlashAttentionShape& shape) {
  // The dQ accumulator, then delta and LSE (log2 units), all over padded rows.
  return static_cast<std::size_t>(shape.batch) * shape.heads * padded_seq_of(shape) *
         (shape.head_dim + 2) * sizeof(float);
}

void flash_attention_backward_sm90(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q,
                                   const Bf16* k, const Bf16* v, const Bf16* out, const float* lse,
                                   const FlashAttentionShape& shape, void* workspace,
                                   cudaStream_t stream) {
  if (shape.head_dim == 64)
    launch_backward_sm90<64>(dq, dk, dv, dout, q, k, v, out, lse, shape, workspace, stream);
  else
    launch_backward_sm90<128>(dq, dk, dv, dout, q, k, v, out, lse, shape, workspace, stream);
}

}  // namespace sextant::kernels::detail
