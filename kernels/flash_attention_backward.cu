// Flash attention backward, causal or not: FlashAttention-2 (Dao 2023), Algorithm 2,
// on the tensor cores through mma.sync m16n8k16 (kernels/flash_attention_mma.cuh).
//
// Three launches:
//   1. delta_i = dO_i . O_i per query row (fp32), the softmax backward's row
//      term (Algorithm 2, line 4, as D_i = rowsum(dO_i o O_i)); the same pass
//      zeroes the fp32 dQ accumulator.
//   2. One thread block of 8 warps per block of 128 keys of one key/value
//      head; each warp owns 16 of the keys. The block keeps its K and V tiles
//      in shared memory and walks every query head of its GQA group and every
//      block of 64 queries at or below the diagonal, Q, dO, LSE and delta
//      arriving by cp.async into two stages (the next block's copy overlapping
//      this block's products). Per query block, per warp, in the transposed
//      orientation (keys as rows), all in the mma C fragments:
//        S^T  = K Q^T                    (16 keys, 64 queries)
//        P^T  = exp2(S^T * scale*log2(e) - LSE*log2(e)), causally masked
//        dP^T = V dO^T
//        dS^T = P^T o (dP^T - delta)     (Algorithm 2, lines 11-14)
//        dV  += P^T dO,  dK += dS^T Q    (lines 12 and 16)
//      P^T and dS^T go from C fragments to A fragments in registers, and dK, dV
//      stay in registers across all query blocks and heads of the group, so
//      they are written once, summed over the group, without atomics. dQ += dS K
//      (line 15) needs every key block's part: dS^T goes to shared memory (two
//      buffers), and in the next step, after the one barrier a step needs
//      anyway, each warp multiplies 16 queries of it by half of head_dim and
//      adds the result into an fp32 buffer with atomics.
//   3. dQ: the fp32 buffer, times the softmax scale, to bf16.
// On compute capability 9.0 (H100, H200), flash_attention_backward runs the
// wgmma kernels of kernels/flash_attention_backward_sm90.cu instead (head_dim
// 64 and 128); this one serves sm_80 and any other device, and the shapes the
// Hopper kernels refuse (grid or TMA limits).
// With kv_seq > seq (bottom-right causal: query i sees keys j <= i + offset,
// offset = kv_seq - seq) the key blocks cover kv_seq, and a key block's walk
// starts at the first query block that sees its first key, (first_key -
// offset) / 64 (0 when that is negative); the masks compare each query with
// its key shifted by the offset, computed once per warp, so only the query
// blocks that straddle the diagonal are masked, as in the square case.
// Non-causal (kCausal false, a second instantiation: the causal one is
// unchanged) compares through an offset past every key (causal_offset,
// kernels/flash_attention_tiles.cuh), so every key block walks every query
// block unmasked; only the warps holding keys past kv_seq (zero-filled K and V
// rows) set those keys' P to 0. (Their dK, dV rows are not stored and their
// K rows are 0, so dQ would not see them anyway, but exp2(-LSE) of a row whose
// every score is below -88 would overflow to inf, and inf * 0 is NaN.)
// Key block 0 sees every query block, so the grid's slowest dimension walks the
// key blocks from 0: the heaviest blocks of every head start first. (One head
// at a time instead starts the last heads' long blocks late: 10 % slower at
// b=4, h=16, s=2048, d=128 and 35 % with GQA kv=4 on an H100.)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_mma.cuh"
#include "kernels/flash_attention_tiles.cuh"

namespace sextant::kernels {
namespace detail {
// The Hopper backward (kernels/flash_attention_backward_sm90.cu): whether it
// takes `shape` (one that flash_attention_unsupported_reason accepts), the
// workspace it needs, and the launcher, for compute capability 9.0 devices only.
bool flash_attention_backward_sm90_supports(const FlashAttentionShape& shape);
std::size_t flash_attention_backward_sm90_workspace_bytes(const FlashAttentionShape& shape);
void flash_attention_backward_sm90(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q,
                                   const Bf16* k, const Bf16* v, const Bf16* out, const float* lse,
                                   const FlashAttentionShape& shape, void* workspace,
                                   cudaStream_t stream);
}  // namespace detail

namespace {

using namespace detail::flash;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * detail::kWarpSize;
constexpr int kBlockKeys = kWarps * kWarpRows;  // 128 keys per block
constexpr int kBlockQueries = 64;               // queries per step
static_assert(kBlockKeys % kBlockQueries == 0, "a key block starts a query block");
static_assert(2 * kBlockQueries <= kThreads, "one thread per LSE and per delta entry");
// One block per SM: at d = 128 it takes 173 KiB of shared memory. At d = 64
// (109 KiB) a second block would need <= 128 registers per thread, what dK, dV,
// S^T and dP^T alone occupy (4 x 32): it spills and ran 18 % slower (H100).
constexpr int kMinBlocksPerSm = 1;

template <int kHeadDim>
struct Layout {
  static constexpr int kDsLd = kPaddedLd<kBlockQueries>;
  static constexpr std::size_t kKeyTileElems = kPaddedTileElems<kBlockKeys, kHeadDim>;  // K, V
  static constexpr std::size_t kQueryTileElems =
      kPaddedTileElems<kBlockQueries, kHeadDim>;  // Q, dO
  static constexpr std::size_t kDsElems = kPaddedTileElems<kBlockKeys, kBlockQueries>;  // dS^T
  // One stage: Q, dO (bf16), then LSE and delta (fp32).
  static constexpr std::size_t kStageBytes =
      2 * kQueryTileElems * sizeof(__nv_bfloat16) + 2 * kBlockQueries * sizeof(float);
  // K, V, two dS^T (this step's and the previous one's, still read by dQ),
  // two stages.
  static constexpr std::size_t kBytes =
      (2 * kKeyTileElems + 2 * kDsElems) * sizeof(__nv_bfloat16) + 2 * kStageBytes;
};

constexpr int kDeltaThreads = 256;

// delta_i = dO_i . O_i for every (batch, query, head) row, and that row of the
// fp32 dQ accumulator set to 0 (the one pass over it before the atomics).
// Each thread takes 8 elements of a row; the d / 8 threads of a row are
// adjacent lanes of one warp and sum by shuffles.
template <int kHeadDim>
__global__ void __launch_bounds__(kDeltaThreads)
    flash_attention_delta_kernel(float* __restrict__ delta,                  // (b, h, s)
                                 float* __restrict__ dq_accum,               // (b, s, h, d), zeroed
                                 const __nv_bfloat16* __restrict__ dout,     // (b, s, h, d)
                                 const __nv_bfloat16* __restrict__ out,      // (b, s, h, d)
                                 long long rows, int seq, int heads) {
  constexpr int kThreadsPerRow = kHeadDim / detail::kBf16PerVector;
  static_assert(detail::kWarpSize % kThreadsPerRow == 0, "a row's threads share a warp");
  const long long thread = static_cast<long long>(blockIdx.x) * kDeltaThreads + threadIdx.x;
  const long long row = thread / kThreadsPerRow;
  const int chunk = static_cast<int>(thread % kThreadsPerRow);
  float sum = 0.f;
  const long long element = row * kHeadDim + chunk * detail::kBf16PerVector;
  if (row < rows) {
    float a[8], b[8];
    detail::load_bf16x8(dout + element, a);
    detail::load_bf16x8(out + element, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += a[i] * b[i];
    auto* zero = reinterpret_cast<float4*>(dq_accum + element);
    zero[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    zero[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int offset = kThreadsPerRow / 2; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (row < rows && chunk == 0) {
    const int head = static_cast<int>(row % heads);
    const long long batch_query = row / heads;
    const long long query = batch_query % seq;
    const long long batch = batch_query / seq;
    delta[(batch * heads + head) * seq + query] = sum;
  }
}

/// dst[0..1] += (x, y) in global memory (8-byte aligned): one vector
/// reduction on sm_90, two scalar ones before.
__device__ __forceinline__ void atomic_add_pair(float* dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x, y));
#else
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
#endif
}

// grid: (kv_heads, batch, key blocks); block: kThreads.
template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    flash_attention_backward_kernel(__nv_bfloat16* __restrict__ dk,         // (b*kv_seq, kv_row_stride)
                                    __nv_bfloat16* __restrict__ dv,         // (b*kv_seq, kv_row_stride)
                                    float* __restrict__ dq_accum,           // (b, s, h, d), +=
                                    const __nv_bfloat16* __restrict__ dout, // (b, s, h, d)
                                    const __nv_bfloat16* __restrict__ q,    // (b*s, q_row_stride)
                                    const __nv_bfloat16* __restrict__ k,    // (b*kv_seq, kv_row_stride)
                                    const __nv_bfloat16* __restrict__ v,    // (b*kv_seq, kv_row_stride)
                                    const float* __restrict__ lse,          // (b, h, s)
                                    const float* __restrict__ delta,        // (b, h, s)
                                    int seq, int kv_seq, int offset, int heads, int kv_heads,
                                    long long q_row_stride, long long kv_row_stride, float scale,
                                    float scale_log2) {
  using L = Layout<kHeadDim>;
  constexpr int kDSteps = kHeadDim / 16;         // k-steps of K Q^T and V dO^T
  constexpr int kDTiles = kHeadDim / 8;          // n-tiles of dK, dV
  constexpr int kQueryTiles = kBlockQueries / 8; // n-tiles of S^T, dP^T
  constexpr int kQuerySteps = kBlockQueries / 16;
  constexpr int kKeySteps = kBlockKeys / 16;     // k-steps of dS K
  constexpr int kDqCols = kHeadDim / 2;          // dQ columns per warp
  static_assert(kWarps == 2 * (kBlockQueries / kWarpRows),
                "dQ: 4 tiles of 16 query rows x 2 column halves");

  extern __shared__ __align__(128) unsigned char shared[];
  auto* k_tile = reinterpret_cast<__nv_bfloat16*>(shared);  // (128 keys, d)
  __nv_bfloat16* v_tile = k_tile + L::kKeyTileElems;        // (128 keys, d)
  __nv_bfloat16* ds_tiles = v_tile + L::kKeyTileElems;      // 2 x dS^T (128 keys, 64 queries)
  unsigned char* stages = reinterpret_cast<unsigned char*>(ds_tiles + 2 * L::kDsElems);
  auto stage_q = [&](int stage) {  // (64 queries, d); dO, LSE, delta follow
    return reinterpret_cast<__nv_bfloat16*>(stages + stage * L::kStageBytes);
  };

  const int kv_head = blockIdx.x;
  const int batch = blockIdx.y;
  const int key_block = blockIdx.z;  // block 0 sees every query block: launched first
  const int group = heads / kv_heads;
  const int first_key = key_block * kBlockKeys;
  // Bottom-right causal: query i sees key j iff i >= j - offset, offset =
  // kv_seq - seq. Keys are compared with queries through `- offset` from here
  // on (offset 0: the square case's comparisons exactly; non-causal,
  // kNonCausalOffset: every query sees every key).
  const int first_query_block = max(first_key - offset, 0) / kBlockQueries;
  const int blocks_per_head = (seq + kBlockQueries - 1) / kBlockQueries - first_query_block;
  const int steps = group * blocks_per_head;
  const std::size_t kv_offset = static_cast<std::size_t>(batch) * kv_seq * kv_row_stride +
                                static_cast<std::size_t>(kv_head) * kHeadDim;
  const std::size_t dout_row_stride = static_cast<std::size_t>(heads) * kHeadDim;

  const int warp = threadIdx.x / detail::kWarpSize;
  const int lane = threadIdx.x % detail::kWarpSize;
  const int g = lane / 4;  // C fragment rows g and g + 8
  const int t = lane % 4;  // C fragment columns 2t, 2t + 1 of each n-tile
  const int warp_first_key = first_key + warp * kWarpRows;
  // The first query that sees the warp's first key (may be negative).
  const int warp_first_query = warp_first_key - offset;

  // Step i covers query block first_query_block + i % blocks_per_head of query
  // head kv_head * group + i / blocks_per_head.
  auto load_step = [&](int step, int stage) {
    const int head = kv_head * group + step / blocks_per_head;
    const int first_query = (first_query_block + step % blocks_per_head) * kBlockQueries;
    __nv_bfloat16* q_dst = stage_q(stage);
    __nv_bfloat16* do_dst = q_dst + L::kQueryTileElems;
    auto* lse_dst = reinterpret_cast<float*>(do_dst + L::kQueryTileElems);
    float* delta_dst = lse_dst + kBlockQueries;
    load_tile_async<kBlockQueries, kHeadDim, kThreads>(
        q_dst, q + static_cast<std::size_t>(batch) * seq * q_row_stride +
                   static_cast<std::size_t>(head) * kHeadDim,
        first_query, seq, q_row_stride);
    load_tile_async<kBlockQueries, kHeadDim, kThreads>(
        do_dst, dout + static_cast<std::size_t>(batch) * seq * dout_row_stride +
                    static_cast<std::size_t>(head) * kHeadDim,
        first_query, seq, dout_row_stride);
    // Past seq, LSE and delta are zero-filled. Such a padding query has Q = 0
    // and dO = 0 rows, so S = 0, P = 1, dP = 0, dS = 1 * (0 - 0) = 0: it adds
    // nothing to dK (dS = 0) or dV (dO = 0), and its dQ row is not written.
    if (threadIdx.x < 2 * kBlockQueries) {
      const int i = threadIdx.x % kBlockQueries;
      const float* src = threadIdx.x < kBlockQueries ? lse : delta;
      float* dst = threadIdx.x < kBlockQueries ? lse_dst : delta_dst;
      const int query = first_query + i;
      const bool valid = query < seq;
      cp_async_4(dst + i,
                 src + (static_cast<std::size_t>(batch) * heads + head) * seq + (valid ? query : 0),
                 valid);
    }
    cp_async_commit();
  };

  load_tile_async<kBlockKeys, kHeadDim, kThreads>(k_tile, k + kv_offset, first_key, kv_seq,
                                                  kv_row_stride);
  load_tile_async<kBlockKeys, kHeadDim, kThreads>(v_tile, v + kv_offset, first_key, kv_seq,
                                                  kv_row_stride);
  load_step(0, 0);  // one group with K and V

  float dk_acc[kDTiles][4], dv_acc[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.f;

  // dQ += dS K for step `step`: (64 queries, 128 keys) x (128 keys, d). Warp w
  // takes queries 16 (w % 4).. and columns (d / 2)(w / 4)..; dS is that step's
  // dS^T read transposed. Called once every warp's rows of it are in place.
  auto add_dq = [&](int step) {
    const int head = kv_head * group + step / blocks_per_head;
    const int first_query = (first_query_block + step % blocks_per_head) * kBlockQueries;
    const __nv_bfloat16* ds_tile = ds_tiles + (step % 2) * L::kDsElems;
    const int dq_row0 = (warp % 4) * kWarpRows;
    const int dq_col0 = (warp / 4) * kDqCols;
    float dq[kDqCols / 8][4];
#pragma unroll
    for (int n = 0; n < kDqCols / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
#pragma unroll
    for (int j = 0; j < kKeySteps; ++j) {
      std::uint32_t a[4];
      ldmatrix_x4_trans(a, transposed_b_rows<kBlockQueries>(ds_tile, j * 16, dq_row0, lane));
#pragma unroll
      for (int np = 0; np < kDqCols / 16; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, fragment_rows<kHeadDim>(k_tile, j * 16, dq_col0 + np * 16, lane));
        mma_bf16(dq[2 * np], a, b[0], b[1]);
        mma_bf16(dq[2 * np + 1], a, b[2], b[3]);
      }
    }
    // Rows g and g + 8, two adjacent columns of each n-tile per lane: 8-byte
    // reductions. (Swapping halves between lanes t and t^1 for one 16-byte
    // reduction per n-tile halves the atomics but measured 2.5 % slower at
    // d = 128 and no faster at d = 64 on an H100.)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int query = first_query + dq_row0 + g + 8 * r;
      if (query >= seq) continue;
      float* dq_row = dq_accum +
                      ((static_cast<std::size_t>(batch) * seq + query) * heads + head) * kHeadDim +
                      dq_col0 + 2 * t;
#pragma unroll
      for (int n = 0; n < kDqCols / 8; ++n)
        atomic_add_pair(dq_row + 8 * n, dq[n][2 * r], dq[n][2 * r + 1]);
    }
  };

  // At d = 64 the warp's K and V rows fit in registers as A fragments (32
  // registers), which saves their ldmatrix every step; at d = 128 the
  // registers are full (dK and dV take 128).
  constexpr bool kKvInRegisters = kHeadDim == 64;
  std::uint32_t k_frag[kKvInRegisters ? kDSteps : 1][4], v_frag[kKvInRegisters ? kDSteps : 1][4];

  // One barrier per step: the previous step's dQ runs after it, beside this
  // step's products, reading the other dS^T buffer.
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<0>();
    // This stage has landed for every thread; every warp has written its rows
    // of the previous step's dS^T, and is done with the other stage (read by
    // the previous step) and with this step's dS^T buffer (read by the dQ of
    // two steps back), which are rewritten next.
    __syncthreads();
    if (step + 1 < steps) load_step(step + 1, (step + 1) % 2);
    if (step > 0) add_dq(step - 1);
    if constexpr (kKvInRegisters) {
      if (step == 0) {
#pragma unroll
        for (int kk = 0; kk < kDSteps; ++kk) {
          ldmatrix_x4(k_frag[kk], fragment_rows<kHeadDim>(k_tile, warp * kWarpRows, kk * 16, lane));
          ldmatrix_x4(v_frag[kk], fragment_rows<kHeadDim>(v_tile, warp * kWarpRows, kk * 16, lane));
        }
      }
    }
    __nv_bfloat16* ds_tile = ds_tiles + (step % 2) * L::kDsElems;

    const int first_query = (first_query_block + step % blocks_per_head) * kBlockQueries;
    const __nv_bfloat16* q_stage = stage_q(step % 2);
    const __nv_bfloat16* do_stage = q_stage + L::kQueryTileElems;
    const auto* lse_stage = reinterpret_cast<const float*>(do_stage + L::kQueryTileElems);
    const float* delta_stage = lse_stage + kBlockQueries;

    if (first_query + kBlockQueries - 1 < warp_first_query) {
      // Every query of the block precedes every key of the warp: P = 0, dS = 0.
      constexpr int kChunksPerRow = kBlockQueries / 8;
      for (int i = lane; i < kWarpRows * kChunksPerRow; i += detail::kWarpSize)
        *reinterpret_cast<uint4*>(ds_tile + (warp * kWarpRows + i / kChunksPerRow) * L::kDsLd +
                                  (i % kChunksPerRow) * 8) = make_uint4(0, 0, 0, 0);
    } else {
      // S^T = K Q^T and dP^T = V dO^T: (16, d) x (d, 64).
      float s[kQueryTiles][4], dp[kQueryTiles][4];
#pragma unroll
      for (int n = 0; n < kQueryTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kDSteps; ++kk) {
        std::uint32_t a_k[4], a_v[4];
        if constexpr (kKvInRegisters) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            a_k[i] = k_frag[kk][i];
            a_v[i] = v_frag[kk][i];
          }
        } else {
          ldmatrix_x4(a_k, fragment_rows<kHeadDim>(k_tile, warp * kWarpRows, kk * 16, lane));
          ldmatrix_x4(a_v, fragment_rows<kHeadDim>(v_tile, warp * kWarpRows, kk * 16, lane));
        }
#pragma unroll
        for (int np = 0; np < kQueryTiles / 2; ++np) {
          std::uint32_t b[4];
          ldmatrix_x4(b, transposed_b_rows<kHeadDim>(q_stage, np * 16, kk * 16, lane));
          mma_bf16(s[2 * np], a_k, b[0], b[1]);
          mma_bf16(s[2 * np + 1], a_k, b[2], b[3]);
          ldmatrix_x4(b, transposed_b_rows<kHeadDim>(do_stage, np * 16, kk * 16, lane));
          mma_bf16(dp[2 * np], a_v, b[0], b[1]);
          mma_bf16(dp[2 * np + 1], a_v, b[2], b[3]);
        }
      }

      // P^T in s, dS^T in dp. Element e of n-tile n: key warp_first_key + g
      // + 8 (e / 2), seen first by query warp_first_query + g + 8 (e / 2);
      // query first_query + 8n + 2t + e % 2.
      const bool needs_mask = first_query < warp_first_query + kWarpRows - 1;
      // Non-causal: the warp holds keys past kv_seq (the last key block's).
      const bool past_kv_seq = !kCausal && warp_first_key + kWarpRows > kv_seq;
#pragma unroll
      for (int n = 0; n < kQueryTiles; ++n) {
        const float2 lse2 = *reinterpret_cast<const float2*>(lse_stage + 8 * n + 2 * t);
        const float2 delta2 = *reinterpret_cast<const float2*>(delta_stage + 8 * n + 2 * t);
        const float lse_log2[2] = {lse2.x * kLog2e, lse2.y * kLog2e};
        const float row_delta[2] = {delta2.x, delta2.y};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float p = fast_exp2(fmaf(s[n][e], scale_log2, -lse_log2[e % 2]));
          if (needs_mask && first_query + 8 * n + 2 * t + e % 2 < warp_first_query + g + 8 * (e / 2))
            p = 0.f;  // the query precedes the key
          if constexpr (!kCausal)
            if (past_kv_seq && warp_first_key + g + 8 * (e / 2) >= kv_seq) p = 0.f;
          s[n][e] = p;
          dp[n][e] = p * (dp[n][e] - row_delta[e % 2]);
        }
        // dS^T rows g and g + 8 to shared memory, for dQ; 4-byte stores, the
        // 32 lanes on 32 different banks (row stride 144 bytes).
        __nv_bfloat16* ds_row = ds_tile + (warp * kWarpRows + g) * L::kDsLd + 8 * n + 2 * t;
        *reinterpret_cast<std::uint32_t*>(ds_row) = pack_bf16(dp[n][0], dp[n][1]);
        *reinterpret_cast<std::uint32_t*>(ds_row + 8 * L::kDsLd) = pack_bf16(dp[n][2], dp[n][3]);
      }

      // dV += P^T dO and dK += dS^T Q: (16, 64) x (64, d); the C fragments of
      // n-tiles 2j, 2j+1 are the A fragment of k-step j; dO and Q are stored
      // k-rows-first, read transposed.
#pragma unroll
      for (int j = 0; j < kQuerySteps; ++j) {
        const std::uint32_t a_p[4] = {pack_bf16(s[2 * j][0], s[2 * j][1]),
                                      pack_bf16(s[2 * j][2], s[2 * j][3]),
                                      pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]),
                                      pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
        const std::uint32_t a_ds[4] = {pack_bf16(dp[2 * j][0], dp[2 * j][1]),
                                       pack_bf16(dp[2 * j][2], dp[2 * j][3]),
                                       pack_bf16(dp[2 * j + 1][0], dp[2 * j + 1][1]),
                                       pack_bf16(dp[2 * j + 1][2], dp[2 * j + 1][3])};
#pragma unroll
        for (int np = 0; np < kDTiles / 2; ++np) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, fragment_rows<kHeadDim>(do_stage, j * 16, np * 16, lane));
          mma_bf16(dv_acc[2 * np], a_p, b[0], b[1]);
          mma_bf16(dv_acc[2 * np + 1], a_p, b[2], b[3]);
          ldmatrix_x4_trans(b, fragment_rows<kHeadDim>(q_stage, j * 16, np * 16, lane));
          mma_bf16(dk_acc[2 * np], a_ds, b[0], b[1]);
          mma_bf16(dk_acc[2 * np + 1], a_ds, b[2], b[3]);
        }
      }
    }
  }
  __syncthreads();  // every warp's rows of the last dS^T are in place
  add_dq(steps - 1);

  // dK (times the softmax scale) and dV, rows g and g + 8 of the warp's keys.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = warp_first_key + g + 8 * r;
    if (key >= kv_seq) continue;
    const std::size_t offset = kv_offset + static_cast<std::size_t>(key) * kv_row_stride + 2 * t;
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
      *reinterpret_cast<std::uint32_t*>(dk + offset + 8 * n) =
          pack_bf16(dk_acc[n][2 * r] * scale, dk_acc[n][2 * r + 1] * scale);
      *reinterpret_cast<std::uint32_t*>(dv + offset + 8 * n) =
          pack_bf16(dv_acc[n][2 * r], dv_acc[n][2 * r + 1]);
    }
  }
}

constexpr int kConvertThreads = 256;

// dst[row * dst_row_stride + c] = scale * src[row * width + c] for c < width;
// width % 8 == 0, 8 elements per thread.
__global__ void __launch_bounds__(kConvertThreads)
    dq_to_bf16_kernel(__nv_bfloat16* __restrict__ dst, const float* __restrict__ src,
                      std::size_t n, int width, long long dst_row_stride, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kConvertThreads * 8;
  for (std::size_t i = (static_cast<std::size_t>(blockIdx.x) * kConvertThreads + threadIdx.x) * 8;
       i < n; i += stride) {
    const float4 a = *reinterpret_cast<const float4*>(src + i);
    const float4 b = *reinterpret_cast<const float4*>(src + i + 4);
    const float x[8] = {a.x * scale, a.y * scale, a.z * scale, a.w * scale,
                        b.x * scale, b.y * scale, b.z * scale, b.w * scale};
    const std::size_t row = i / width;
    detail::store_bf16x8(dst + row * dst_row_stride + (i - row * width), x);
  }
}

std::size_t dq_accum_elems(const FlashAttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * s.seq * s.heads * s.head_dim;
}

template <int kHeadDim, bool kCausal>
void launch_backward(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q, const Bf16* k,
                     const Bf16* v, const Bf16* out, const float* lse,
                     const FlashAttentionShape& shape, float* dq_accum, float* delta,
                     cudaStream_t stream) {
  const std::size_t n = dq_accum_elems(shape);
  const long long rows = static_cast<long long>(shape.batch) * shape.seq * shape.heads;
  constexpr int kRowsPerBlock = kDeltaThreads / (kHeadDim / detail::kBf16PerVector);
  flash_attention_delta_kernel<kHeadDim>
      <<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), kDeltaThreads, 0,
         stream>>>(delta, dq_accum, detail::cuda_bf16(dout), detail::cuda_bf16(out), rows,
                   shape.seq, shape.heads);
  SEXTANT_CHECK_LAUNCH("flash_attention_delta_kernel");

  constexpr std::size_t kBytes = Layout<kHeadDim>::kBytes;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_backward_kernel<kHeadDim, kCausal>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kBytes)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  const int kv_seq = kv_seq_of(shape);
  const dim3 grid(shape.kv_heads, shape.batch, (kv_seq + kBlockKeys - 1) / kBlockKeys);
  flash_attention_backward_kernel<kHeadDim, kCausal><<<grid, kThreads, kBytes, stream>>>(
      detail::cuda_bf16(dk), detail::cuda_bf16(dv), dq_accum, detail::cuda_bf16(dout),
      detail::cuda_bf16(q), detail::cuda_bf16(k), detail::cuda_bf16(v), lse, delta, shape.seq,
      kv_seq, causal_offset(shape), shape.heads, shape.kv_heads, q_row_stride(shape), kv_row_stride(shape),
      static_cast<float>(scale), static_cast<float>(scale * 1.4426950408889634));  // log2(e) / sqrt(d)
  SEXTANT_CHECK_LAUNCH("flash_attention_backward_kernel");

  // Enough blocks to fill any GPU several times over; the loop covers the rest.
  const std::size_t threads_needed = n / 8;
  const unsigned blocks = static_cast<unsigned>(
      std::min<std::size_t>((threads_needed + kConvertThreads - 1) / kConvertThreads, 1u << 16));
  dq_to_bf16_kernel<<<blocks, kConvertThreads, 0, stream>>>(
      detail::cuda_bf16(dq), dq_accum, n, shape.heads * shape.head_dim, q_row_stride(shape),
      static_cast<float>(scale));
  SEXTANT_CHECK_LAUNCH("dq_to_bf16_kernel");
}

// GQA with few key/value heads: the kernel's grid is (kv_heads, batch, key
// blocks), each block walking its group's query heads in turn, so 2 kv heads of
// one 2048-token sequence made 32 blocks for 132 SMs: 490 us against the
// forward's 30 us (moe-fine-tiny, reports/measurements/2026-11-27-h100-moe-ncu).
// Below one block per SM, K and V are copied out to every query head, the kernel
// runs as MHA (heads x batch x key blocks), and each head's dK, dV (bf16) are
// summed over its group in fp32 and rounded once more.
bool expands_kv_heads(const FlashAttentionShape& shape, int sm_count) {
  const long long blocks = static_cast<long long>(shape.kv_heads) * shape.batch *
                           ((kv_seq_of(shape) + kBlockKeys - 1) / kBlockKeys);
  return shape.kv_heads < shape.heads && blocks < sm_count;
}

// Elements of one expanded buffer: (batch, kv_seq, heads, head_dim).
std::size_t expanded_elems(const FlashAttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * kv_seq_of(s) * s.heads * s.head_dim;
}

constexpr std::size_t kWorkspaceAlign = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// The generic kernel's fp32 dQ accumulator and delta rows.
std::size_t generic_workspace_bytes(const FlashAttentionShape& shape) {
  const std::size_t rows = static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq;
  // The delta rows follow dQ; dQ's size is a multiple of 64 floats, so delta stays aligned.
  return (dq_accum_elems(shape) + rows) * sizeof(float);
}

// One 8-element vector of a (rows, heads, head_dim) tensor: vector i of the
// grid-stride walk, in row, head, column order.
struct HeadVector {
  long long row;
  int head, column;
};
__device__ HeadVector head_vector(long long i, int heads, int head_dim) {
  const int vectors_per_head = head_dim / detail::kBf16PerVector;
  return {i / (static_cast<long long>(heads) * vectors_per_head), static_cast<int>(i / vectors_per_head % heads),
          static_cast<int>(i % vectors_per_head) * detail::kBf16PerVector};
}

// k_out, v_out (rows, heads, head_dim) = k, v (rows, kv_row_stride)'s head h / group.
__global__ void expand_kv_heads_kernel(__nv_bfloat16* k_out, __nv_bfloat16* v_out, const __nv_bfloat16* k,
                                       const __nv_bfloat16* v, long long rows, int heads, int group,
                                       int head_dim, long long kv_row_stride) {
  const long long n = rows * heads * (head_dim / detail::kBf16PerVector);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const HeadVector x = head_vector(i, heads, head_dim);
    const long long from = x.row * kv_row_stride + static_cast<long long>(x.head / group) * head_dim + x.column;
    const long long to = (x.row * heads + x.head) * head_dim + x.column;
    *reinterpret_cast<uint4*>(k_out + to) = *reinterpret_cast<const uint4*>(k + from);
    *reinterpret_cast<uint4*>(v_out + to) = *reinterpret_cast<const uint4*>(v + from);
  }
}

// dk, dv (rows, kv_row_stride)'s kv head j = the sum over its group of dk_heads,
// dv_heads (rows, heads, head_dim), in fp32.
__global__ void sum_kv_head_groups_kernel(__nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dk_heads,
                                          const __nv_bfloat16* dv_heads, long long rows, int kv_heads,
                                          int group, int head_dim, long long kv_row_stride) {
  const long long n = rows * kv_heads * (head_dim / detail::kBf16PerVector);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const HeadVector x = head_vector(i, kv_heads, head_dim);
    const long long row = x.row;
    const int kv_head = x.head, column = x.column;
    float k_sum[detail::kBf16PerVector] = {}, v_sum[detail::kBf16PerVector] = {};
    for (int j = 0; j < group; ++j) {
      const long long from = (row * kv_heads * group + static_cast<long long>(kv_head) * group + j) * head_dim + column;
      float k_part[detail::kBf16PerVector], v_part[detail::kBf16PerVector];
      detail::load_bf16x8(dk_heads + from, k_part);
      detail::load_bf16x8(dv_heads + from, v_part);
#pragma unroll
      for (int c = 0; c < detail::kBf16PerVector; ++c) {
        k_sum[c] += k_part[c];
        v_sum[c] += v_part[c];
      }
    }
    const long long to = row * kv_row_stride + static_cast<long long>(kv_head) * head_dim + column;
    detail::store_bf16x8(dk + to, k_sum);
    detail::store_bf16x8(dv + to, v_sum);
  }
}

unsigned elementwise_blocks(long long threads) {
  return static_cast<unsigned>(std::min<long long>((threads + kConvertThreads - 1) / kConvertThreads, 1 << 16));
}

}  // namespace

namespace {
// The device's properties, queried per call (cheap: the runtime caches them).
int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// GQA shapes the generic kernel may run with K and V expanded
// (expands_kv_heads), so flash_attention_backward_workspace_bytes, which does
// not ask the device, keeps room for the copies: head_dim 64 (on devices other
// than 9.0, as before the Hopper backward took head_dim 64) and the shapes the
// Hopper backward refuses. (A head_dim 128 shape on a device other than 9.0
// runs the generic kernel unexpanded.)
bool generic_may_expand_kv_heads(const FlashAttentionShape& shape) {
  return shape.kv_heads < shape.heads &&
         (shape.head_dim == 64 || !detail::flash_attention_backward_sm90_supports(shape));
}
}  // namespace

// The wgmma kernels are compiled for sm_90a only, whose machine code runs on
// compute capability 9.0 alone.
bool flash_attention_backward_runs_sm90(const FlashAttentionShape& shape) {
  return device_attribute(cudaDevAttrComputeCapabilityMajor) == 9 &&
         device_attribute(cudaDevAttrComputeCapabilityMinor) == 0 &&
         detail::flash_attention_backward_sm90_supports(shape);
}

bool flash_attention_backward_expands_kv_heads(const FlashAttentionShape& shape) {
  return generic_may_expand_kv_heads(shape) && !flash_attention_backward_runs_sm90(shape) &&
         expands_kv_heads(shape, device_attribute(cudaDevAttrMultiProcessorCount));
}

std::size_t flash_attention_backward_workspace_bytes(const FlashAttentionShape& shape) {
  if (!flash_attention_unsupported_reason(shape).empty()) return 0;
  // Enough for either kernel, whichever device runs it (the Hopper one pads
  // the rows to whole query blocks and adds LSE).
  std::size_t bytes = generic_workspace_bytes(shape);
  if (generic_may_expand_kv_heads(shape))
    bytes = aligned(bytes) + 4 * expanded_elems(shape) * sizeof(Bf16);
  if (detail::flash_attention_backward_sm90_supports(shape))
    bytes = std::max(bytes, detail::flash_attention_backward_sm90_workspace_bytes(shape));
  return bytes;
}

void flash_attention_backward(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q,
                              const Bf16* k, const Bf16* v, const Bf16* out, const float* lse,
                              const FlashAttentionShape& shape, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* kName = "flash_attention_backward";
  const std::string reason = flash_attention_unsupported_reason(shape);
  require_argument(reason.empty(), kName, reason);
  require_argument(dq != nullptr && dk != nullptr && dv != nullptr && dout != nullptr &&
                       q != nullptr && k != nullptr && v != nullptr && out != nullptr &&
                       lse != nullptr && workspace != nullptr,
                   kName, "dq, dk, dv, dout, q, k, v, out, lse and workspace must not be null");
  require_argument(is_aligned(dq, 16) && is_aligned(dk, 16) && is_aligned(dv, 16) &&
                       is_aligned(dout, 16) && is_aligned(q, 16) && is_aligned(k, 16) &&
                       is_aligned(v, 16) && is_aligned(out, 16) && is_aligned(workspace, 16),
                   kName,
                   "dq, dk, dv, dout, q, k, v, out and workspace must be 16-byte aligned "
                   "(16-byte row loads)");
  const std::size_t needed = flash_attention_backward_workspace_bytes(shape);
  require_argument(workspace_bytes >= needed, kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(needed) +
                       " bytes flash_attention_backward_workspace_bytes asks for");
  if (flash_attention_backward_runs_sm90(shape)) {
    detail::flash_attention_backward_sm90(dq, dk, dv, dout, q, k, v, out, lse, shape, workspace,
                                          stream);
    return;
  }
  auto* dq_accum = static_cast<float*>(workspace);
  float* delta = dq_accum + dq_accum_elems(shape);
  const auto launch = [&](Bf16* dk_to, Bf16* dv_to, const Bf16* k_from, const Bf16* v_from,
                          const FlashAttentionShape& s) {
    if (s.causal) {
      if (s.head_dim == 64)
        launch_backward<64, true>(dq, dk_to, dv_to, dout, q, k_from, v_from, out, lse, s, dq_accum, delta, stream);
      else
        launch_backward<128, true>(dq, dk_to, dv_to, dout, q, k_from, v_from, out, lse, s, dq_accum, delta, stream);
    } else if (s.head_dim == 64) {
      launch_backward<64, false>(dq, dk_to, dv_to, dout, q, k_from, v_from, out, lse, s, dq_accum, delta, stream);
    } else {
      launch_backward<128, false>(dq, dk_to, dv_to, dout, q, k_from, v_from, out, lse, s, dq_accum, delta, stream);
    }
  };
  if (!flash_attention_backward_expands_kv_heads(shape)) {
    launch(dk, dv, k, v, shape);
    return;
  }
  const std::size_t n = expanded_elems(shape);
  Bf16* k_heads = reinterpret_cast<Bf16*>(static_cast<char*>(workspace) + aligned(generic_workspace_bytes(shape)));
  Bf16* v_heads = k_heads + n;
  Bf16* dk_heads = v_heads + n;
  Bf16* dv_heads = dk_heads + n;
  const long long rows = static_cast<long long>(shape.batch) * kv_seq_of(shape);  // K, V rows
  const int group = shape.heads / shape.kv_heads;
  const long long vectors_per_row = static_cast<long long>(shape.heads) * shape.head_dim / detail::kBf16PerVector;
  expand_kv_heads_kernel<<<elementwise_blocks(rows * vectors_per_row), kConvertThreads, 0, stream>>>(
      detail::cuda_bf16(k_heads), detail::cuda_bf16(v_heads), detail::cuda_bf16(k), detail::cuda_bf16(v), rows,
      shape.heads, group, shape.head_dim, kv_row_stride(shape));
  SEXTANT_CHECK_LAUNCH("expand_kv_heads_kernel");
  FlashAttentionShape mha = shape;
  mha.kv_heads = shape.heads;
  mha.kv_row_stride = 0;  // dense: heads x head_dim
  launch(dk_heads, dv_heads, k_heads, v_heads, mha);
  sum_kv_head_groups_kernel<<<elementwise_blocks(rows * vectors_per_row / group), kConvertThreads, 0, stream>>>(
      detail::cuda_bf16(dk), detail::cuda_bf16(dv), detail::cuda_bf16(dk_heads), detail::cuda_bf16(dv_heads), rows,
      shape.kv_heads, group, shape.head_dim, kv_row_stride(shape));
  SEXTANT_CHECK_LAUNCH("sum_kv_head_groups_kernel");
}

}  // namespace sextant::kernels
