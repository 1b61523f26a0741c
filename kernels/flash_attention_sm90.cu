// Flash attention forward for Hopper (sm_90a), causal or not: the loop of
// FlashAttention-2 (Dao 2023, Algorithm 1) on warpgroup MMA, laid out as
// FlashAttention-3 (Shah et al. 2024) does it:
//
// - Warp specialization (FA3 section 3.1): a block is 3 warpgroups. One thread
//   of warpgroup 0, the producer, copies Q, K and V tiles into shared memory
//   with TMA (128-byte swizzled, the layout wgmma reads) through a pipeline of
//   kStages (K, V) slots guarded by mbarriers; it keeps 24 registers
//   (setmaxnreg) so the two consumer warpgroups can have 240 each.
// - Each consumer warpgroup owns 64 of the tile's 128 query rows. Per key block
//   of 128: S = Q K^T (wgmma, Q and K from shared memory, both K-major), the
//   online softmax on S's accumulator registers, then O += P V with P straight
//   from registers (the accumulators rounded to bf16 are wgmma's A fragment,
//   kernels/wgmma.cuh) and V from shared memory read MN-major (transpose bit).
// - Intra-warpgroup overlap (FA3 section 3.2, Algorithm 2): block j's
//   S = Q K_j^T and block j-1's O += P_{j-1} V_{j-1} are issued together, and the
//   softmax of S_j runs while P V is still on the tensor cores; O is rescaled by
//   exp(m_{j-1} - m_j) once P V retires. The two consumer warpgroups interleave
//   on the SM, so one's softmax also hides behind the other's products.
// - Persistent blocks (FA3 section 3.1, tile scheduler): the grid is one block
//   per SM walking the (query block, batch, head) tiles heaviest first (the
//   causal triangle's last query block sees every key), in a snake order: round
//   r gives block x tile r * grid + x on even rounds and r * grid + grid - 1 - x
//   on odd ones, so the blocks that take the heaviest tile of one round take the
//   lightest of the next. The producer loads the next tile's Q and first K, V
//   while the consumers finish the current tile.
//
// The causal mask is applied only to the diagonal block (128-row query tiles
// against 128-key blocks), which is processed first so every row's running max
// is finite from the first step on. With kv_seq > seq (bottom-right causal:
// query i sees keys j <= i + offset, offset = kv_seq - seq) this kernel takes
// offsets that are whole key blocks (offset % 128 == 0, so the diagonal still
// lies in one block, masked exactly as in the square case): query block q
// walks key blocks q + offset / 128 down to 0. Other offsets run on
// kernels/flash_attention.cu's kernel (flash_attention_forward_sm90_supports).
// Non-causal (kCausal false, a second instantiation: the causal one is
// unchanged) takes any kv_seq: every tile walks every key block from the last
// one, the only masked block, whose keys past kv_seq (zero-filled by TMA,
// which would score 0) get -inf; its key 0 is real, so every row's running max
// is finite from the first block on. Scores go to log2 units at the exponential
// (ex2.approx), and LSE is written in natural-log units, as in
// kernels/flash_attention.cu, whose interface this shares.
//
// Shared memory at head_dim 128: Q 32 KiB + 3 stages x (K 32 KiB + V 32 KiB) =
// 224 KiB, one block per SM. Rows past seq are zero-filled by TMA (the tensor
// maps are 4-D, (head_dim, heads, seq, batch), so a tile never reads the next
// sequence), and their outputs are not stored.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/attention_tensor_map.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_mma.cuh"
#include "kernels/flash_attention_tiles.cuh"
#include "kernels/wgmma.cuh"

namespace sextant::kernels::detail {
namespace {

using namespace flash;
using namespace sm90;

constexpr int kWarpgroupThreads = 128;
constexpr int kConsumerWarpgroups = 2;
constexpr int kThreads = (1 + kConsumerWarpgroups) * kWarpgroupThreads;
constexpr int kWarpgroupRows = 64;                                // wgmma's M
constexpr int kBlockRows = kConsumerWarpgroups * kWarpgroupRows;  // query rows per tile
constexpr int kBlockKeys = 128;                                   // keys per block
static_assert(kBlockRows == kBlockKeys, "only the diagonal key block needs the causal mask");
// (K, V) slots. FA3 uses 2 at head_dim 128; 3 (224 KiB of shared memory at
// d = 128) measured 448 against 440 TFLOP/s at d = 128 and 379 against 361 at
// d = 64 (b = 4, h = 16, s = 2048, H100 SXM). FA3's ping-pong scheduling of the
// two consumer warpgroups (section 3.1, named barriers around each warpgroup's
// products) measured no better (445 and 356 with 2 stages, 446 and 355 with 3)
// and 4 % slower at s = 8192, so it is not used.
constexpr int kStages = 3;
// 64 bf16 = 128 bytes: one swizzled row of a panel (kernels/wgmma.cuh).
constexpr int kPanelCols = kTensorMapBoxCols;
constexpr std::uint32_t kPanelRowBytes = 128;

template <int kHeadDim>
struct Layout {
  static constexpr int kPanels = kHeadDim / kPanelCols;
  static constexpr std::uint32_t kQPanelBytes = kBlockRows * kPanelRowBytes;
  static constexpr std::uint32_t kKvPanelBytes = kBlockKeys * kPanelRowBytes;
  static constexpr std::uint32_t kQBytes = kPanels * kQPanelBytes;    // (128, d)
  static constexpr std::uint32_t kKvBytes = kPanels * kKvPanelBytes;  // (128, d), K or V
  static constexpr std::size_t kKOffset = kQBytes;
  static constexpr std::size_t kVOffset = kKOffset + kStages * kKvBytes;
  static constexpr std::size_t kBarrierOffset = kVOffset + kStages * kKvBytes;
  // The dynamic shared memory base is only 16-byte aligned; swizzled panels
  // need 1024.
  static constexpr std::size_t kBytes = kBarrierOffset + 256 + 1024;
  // Compute capability 9.0's opt-in maximum per block: 227 KiB (CUDA C++
  // Programming Guide, "Technical Specifications per Compute Capability").
  static_assert(kBytes <= 227 * 1024, "does not fit in an sm_90 block's shared memory");
};

struct Barriers {
  std::uint64_t q_full;   // Q of the current tile landed (TMA bytes)
  std::uint64_t q_empty;  // both consumer warpgroups are done reading Q
  std::uint64_t k_full[kStages], k_empty[kStages];
  std::uint64_t v_full[kStages], v_empty[kStages];
};

struct Tile {
  int q_block, batch, head;
};

// The device code exists only in the sm_90a pass; the sm_80 and compute_90
// passes compile an empty kernel, which the dispatch never launches.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int kConsumerWarps = kConsumerWarpgroups * kWarpgroupThreads / kWarpSize;
// Register budgets after setmaxnreg (FA3's for two consumer warpgroups): 128 *
// 24 + 256 * 240 = 64512 of the SM's 65536, the 168 per thread the launch
// bound gives all 384 threads.
constexpr int kProducerRegisters = 24;
constexpr int kConsumerRegisters = 240;

/// The tile this block takes in round `round` (snake order), or >= tiles when none.
__device__ __forceinline__ int tile_of_round(int round) {
  const int x = round % 2 == 0 ? static_cast<int>(blockIdx.x)
                               : static_cast<int>(gridDim.x - 1 - blockIdx.x);
  return round * static_cast<int>(gridDim.x) + x;
}

/// Tiles in heaviest-first order: index / (batch * heads) counts query blocks
/// down from the last.
__device__ __forceinline__ Tile decode_tile(int index, int heads, int batch_heads, int q_blocks) {
  const int bh = index % batch_heads;
  return {q_blocks - 1 - index / batch_heads, bh / heads, bh % heads};
}

struct Shared {
  unsigned char* q;  // (128, d): kPanels panels of (128, 64)
  unsigned char* k;  // kStages x (128, d)
  unsigned char* v;  // kStages x (128, d)
  Barriers* barriers;
};

/// The first key block a tile walks (it walks down to 0): causal, the one on
/// the tile's diagonal; non-causal, the last one.
template <bool kCausal>
__device__ __forceinline__ int first_key_block(const Tile& tile, int offset_blocks, int kv_seq) {
  return kCausal ? tile.q_block + offset_blocks : (kv_seq - 1) / kBlockKeys;
}

/// The producer: one thread issuing every TMA copy of this block.
template <int kHeadDim, bool kCausal>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* k_map,
                                        const CUtensorMap* v_map, const Shared& sh, int heads,
                                        int group, int batch_heads, int q_blocks, int tiles,
                                        int offset_blocks, int kv_seq) {
  using L = Layout<kHeadDim>;
  Barriers* bar = sh.barriers;
  tma_prefetch_map(q_map);
  tma_prefetch_map(k_map);
  tma_prefetch_map(v_map);
  int kv_iter = 0;  // key blocks loaded so far, over all tiles
  for (int round = 0;; ++round) {
    const int index = tile_of_round(round);
    if (index >= tiles) break;
    const Tile tile = decode_tile(index, heads, batch_heads, q_blocks);
    const int kv_head = tile.head / group;
    // Q's slot is free once both warpgroups finished the previous tile's last S.
    mbarrier_wait(&bar->q_empty, (round & 1) ^ 1);
    mbarrier_arrive_expect_tx(&bar->q_full, L::kQBytes);
#pragma unroll
    for (int p = 0; p < L::kPanels; ++p)
      tma_load_4d(sh.q + p * L::kQPanelBytes, q_map, &bar->q_full, p * kPanelCols, tile.head,
                  tile.q_block * kBlockRows, tile.batch);
    for (int key_block = first_key_block<kCausal>(tile, offset_blocks, kv_seq); key_block >= 0;
         --key_block, ++kv_iter) {
      const int stage = kv_iter % kStages;
      const std::uint32_t empty_parity = ((kv_iter / kStages) & 1) ^ 1;
      mbarrier_wait(&bar->k_empty[stage], empty_parity);
      mbarrier_arrive_expect_tx(&bar->k_full[stage], L::kKvBytes);
#pragma unroll
      for (int p = 0; p < L::kPanels; ++p)
        tma_load_4d(sh.k + stage * L::kKvBytes + p * L::kKvPanelBytes, k_map, &bar->k_full[stage],
                    p * kPanelCols, kv_head, key_block * kBlockKeys, tile.batch);
      mbarrier_wait(&bar->v_empty[stage], empty_parity);
      mbarrier_arrive_expect_tx(&bar->v_full[stage], L::kKvBytes);
#pragma unroll
      for (int p = 0; p < L::kPanels; ++p)
        tma_load_4d(sh.v + stage * L::kKvBytes + p * L::kKvPanelBytes, v_map, &bar->v_full[stage],
                    p * kPanelCols, kv_head, key_block * kBlockKeys, tile.batch);
    }
  }
}

/// One arrival per consumer warp, after the warp's wgmma reading the slot retired.
__device__ __forceinline__ void release(std::uint64_t* barrier, int lane) {
  if (lane == 0) mbarrier_arrive(barrier);
}

/// Online softmax (FlashAttention-2, Algorithm 1, lines 8-10) on one block's
/// S accumulators: this thread's rows r0 and r0 + 8 of the tile (values
/// s[4i + 0, 1] and s[4i + 2, 3], columns 8i + 2t, + 1). Turns s into
/// P = exp2(s * scale_log2 - m * scale_log2), updates the running max m (raw
/// scores) and this lane's part of the row sums l, and returns in alpha the
/// factor exp(m_old - m_new) that O must be rescaled by. Mask::kDiagonal: key
/// c of the block is masked for tile row r < c (the causal diagonal block);
/// Mask::kKeys: keys c >= `keys` are masked (the non-causal last block).
enum class Mask { kNone, kDiagonal, kKeys };
template <Mask kMask>
__device__ __forceinline__ void online_softmax(float (&s)[kBlockKeys / 2], float (&m)[2],
                                               float (&l)[2], float (&alpha)[2], float scale_log2,
                                               int r0, int t, int keys = kBlockKeys) {
  constexpr int kTiles = kBlockKeys / 8;
  if constexpr (kMask == Mask::kDiagonal) {
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (8 * i + 2 * t + (e % 2) > r0 + 8 * (e / 2)) s[4 * i + e] = -INFINITY;
  } else if constexpr (kMask == Mask::kKeys) {
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (8 * i + 2 * t + (e % 2) >= keys) s[4 * i + e] = -INFINITY;
  }
  float m_new[2] = {m[0], m[1]};
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    m_new[0] = fmaxf(m_new[0], fmaxf(s[4 * i], s[4 * i + 1]));
    m_new[1] = fmaxf(m_new[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
  }
  float m_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // The four lanes of a quad share the row.
    m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
    m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
    // Finite once the first block is seen (its key 0 is never masked); the guard keeps exp2(-inf - -inf) from making a NaN.
    m_scaled[r] = m_new[r] == -INFINITY ? 0.f : m_new[r] * scale_log2;
    alpha[r] = fast_exp2(m[r] * scale_log2 - m_scaled[r]);  // 0 on the first block
    m[r] = m_new[r];
    l[r] *= alpha[r];
  }
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[4 * i + e] = fast_exp2(fmaf(s[4 * i + e], scale_log2, -m_scaled[e / 2]));
      l[e / 2] += s[4 * i + e];
    }
}

/// P rounded to bf16 as the A fragments of O += P V: k-step k is columns
/// [16k, 16k + 16) of S, p[k][r] = (s[8k + 2r], s[8k + 2r + 1]) (kernels/wgmma.cuh).
__device__ __forceinline__ void convert_p(const float (&s)[kBlockKeys / 2],
                                          std::uint32_t (&p)[kBlockKeys / 16][4]) {
#pragma unroll
  for (int k = 0; k < kBlockKeys / 16; ++k)
#pragma unroll
    for (int r = 0; r < 4; ++r) p[k][r] = pack_bf16(s[8 * k + 2 * r], s[8 * k + 2 * r + 1]);
}

/// A consumer warpgroup: 64 query rows of every tile this block takes.
template <int kHeadDim, bool kCausal>
__device__ __forceinline__ void consume(const Shared& sh, __nv_bfloat16* __restrict__ out,
                                        float* __restrict__ lse, int seq, int heads,
                                        int batch_heads, int q_blocks, int tiles,
                                        int offset_blocks, int kv_seq, float scale_log2) {
  using L = Layout<kHeadDim>;
  constexpr int kDSteps = kHeadDim / 16;      // k-steps of S = Q K^T
  constexpr int kKeySteps = kBlockKeys / 16;  // k-steps of O = P V
  Barriers* bar = sh.barriers;
  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads - 1;
  const int warp = (static_cast<int>(threadIdx.x) % kWarpgroupThreads) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int r0 = warpgroup * kWarpgroupRows + 16 * warp + g;  // tile rows r0 and r0 + 8

  // Q: this warpgroup's 64 rows of each panel, K-major; K: K-major (B = K^T);
  // V: MN-major B, panels kKvPanelBytes apart along N (kernels/wgmma.cuh).
  const std::uint64_t q_desc = make_smem_descriptor(
      sh.q + warpgroup * kWarpgroupRows * kPanelRowBytes, 16, 1024, Swizzle::k128B);
  const std::uint64_t k_desc = make_smem_descriptor(sh.k, 16, 1024, Swizzle::k128B);
  const std::uint64_t v_desc = make_smem_descriptor(sh.v, L::kKvPanelBytes, 1024, Swizzle::k128B);
  // Byte offset of k-step kk in a K-major panel set: panel kk / 4, 32 bytes per step.
  auto k_major_step = [](int kk) -> std::uint32_t {
    return (kk / 4) * (kBlockKeys * kPanelRowBytes) + (kk % 4) * 32;
  };
  static_assert(kBlockRows * kPanelRowBytes == kBlockKeys * kPanelRowBytes,
                "Q and K panels have the same size, so k_major_step serves both");

  float s[kBlockKeys / 2];           // S, then P in fp32: (64, 128) per warpgroup
  float o[kHeadDim / 2];             // O: (64, d) per warpgroup
  std::uint32_t p[kKeySteps][4];     // P in bf16, A fragments

  auto issue_s = [&](int stage) {
    wgmma_fence_operand(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk)
      wgmma_m64k16_ss<kBlockKeys, false, false>(
          s, advance_descriptor(q_desc, k_major_step(kk)),
          advance_descriptor(k_desc, stage * L::kKvBytes + k_major_step(kk)), kk > 0);
    wgmma_commit_group();
    wgmma_fence_operand(s);
  };
  auto issue_pv = [&](int stage) {
    wgmma_fence_operand(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeySteps; ++kk)
      wgmma_m64k16_rs<kHeadDim, true>(
          o, p[kk], advance_descriptor(v_desc, stage * L::kKvBytes + kk * 16 * kPanelRowBytes),
          true);
    wgmma_commit_group();
    wgmma_fence_operand(o);
  };

  int kv_iter = 0;  // key blocks consumed so far, over all tiles
  for (int round = 0;; ++round) {
    const int index = tile_of_round(round);
    if (index >= tiles) break;
    const Tile tile = decode_tile(index, heads, batch_heads, q_blocks);
    const int blocks = first_key_block<kCausal>(tile, offset_blocks, kv_seq) + 1;

#pragma unroll
    for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows r0, r0 + 8 (raw scores)
    float l[2] = {0.f, 0.f};              // this lane's part of the running sums
    float alpha[2];
    mbarrier_wait(&bar->q_full, round & 1);

    // The diagonal block (non-causal: the last one): S alone, masked.
    int stage = kv_iter % kStages;
    std::uint32_t parity = (kv_iter / kStages) & 1;
    mbarrier_wait(&bar->k_full[stage], parity);
    issue_s(stage);
    wgmma_wait_group<0>();
    wgmma_fence_operand(s);
    release(&bar->k_empty[stage], lane);
    if (blocks == 1) release(&bar->q_empty, lane);
    if constexpr (kCausal)
      online_softmax<Mask::kDiagonal>(s, m, l, alpha, scale_log2, r0, t);
    else
      online_softmax<Mask::kKeys>(s, m, l, alpha, scale_log2, r0, t,
                                  kv_seq - (blocks - 1) * kBlockKeys);
    convert_p(s, p);
    int prev_stage = stage;
    std::uint32_t prev_parity = parity;
    ++kv_iter;

    for (int j = 1; j < blocks; ++j, ++kv_iter) {
      stage = kv_iter % kStages;
      parity = (kv_iter / kStages) & 1;
      mbarrier_wait(&bar->k_full[stage], parity);
      mbarrier_wait(&bar->v_full[prev_stage], prev_parity);
      issue_s(stage);        // S_j = Q K_j^T
      issue_pv(prev_stage);  // O += P_{j-1} V_{j-1}
      wgmma_wait_group<1>();  // S_j retired; P V may still run
      wgmma_fence_operand(s);
      release(&bar->k_empty[stage], lane);
      if (j == blocks - 1) release(&bar->q_empty, lane);
      online_softmax<Mask::kNone>(s, m, l, alpha, scale_log2, r0, t);
      wgmma_wait_group<0>();
      wgmma_fence_operand(o);
      release(&bar->v_empty[prev_stage], lane);
#pragma unroll
      for (int i = 0; i < kHeadDim / 8; ++i) {
        o[4 * i] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
      }
      convert_p(s, p);
      prev_stage = stage;
      prev_parity = parity;
    }
    mbarrier_wait(&bar->v_full[prev_stage], prev_parity);
    issue_pv(prev_stage);
    wgmma_wait_group<0>();
    wgmma_fence_operand(o);
    release(&bar->v_empty[prev_stage], lane);

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    // l >= 1: the row's own maximum contributes exp2(0).
    const float inv_l[2] = {1.f / l[0], 1.f / l[1]};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = tile.q_block * kBlockRows + r0 + 8 * r;
      if (row >= seq) continue;
      __nv_bfloat16* out_row =
          out + ((static_cast<std::size_t>(tile.batch) * seq + row) * heads + tile.head) *
                    static_cast<std::size_t>(kHeadDim);
#pragma unroll
      for (int i = 0; i < kHeadDim / 8; ++i)
        *reinterpret_cast<std::uint32_t*>(out_row + 8 * i + 2 * t) =
            pack_bf16(o[4 * i + 2 * r] * inv_l[r], o[4 * i + 2 * r + 1] * inv_l[r]);
      if (t == 0)
        lse[(static_cast<std::size_t>(tile.batch) * heads + tile.head) * seq + row] =
            (m[r] * scale_log2 + log2f(l[r])) * kLn2;  // log2 units to natural
    }
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid: min(tiles, SMs) persistent blocks; block: kThreads.
template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
    flash_attention_forward_sm90_kernel(const __grid_constant__ CUtensorMap q_map,
                                        const __grid_constant__ CUtensorMap k_map,
                                        const __grid_constant__ CUtensorMap v_map,
                                        __nv_bfloat16* __restrict__ out,  // (b, s, h, d)
                                        float* __restrict__ lse,          // (b, h, s)
                                        int seq, int heads, int group, int batch_heads,
                                        int q_blocks, int tiles, int offset_blocks,
                                        int kv_seq, float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<kHeadDim>;
  extern __shared__ unsigned char shared_raw[];
  unsigned char* base = shared_raw + ((1024 - (shared_u32(shared_raw) & 1023)) & 1023);
  const Shared sh{base, base + L::kKOffset, base + L::kVOffset,
                  reinterpret_cast<Barriers*>(base + L::kBarrierOffset)};
  if (threadIdx.x == 0) {
    Barriers* bar = sh.barriers;
    mbarrier_init(&bar->q_full, 1);
    mbarrier_init(&bar->q_empty, kConsumerWarps);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&bar->k_full[s], 1);
      mbarrier_init(&bar->v_full[s], 1);
      mbarrier_init(&bar->k_empty[s], kConsumerWarps);
      mbarrier_init(&bar->v_empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < kWarpgroupThreads) {
    setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == 0)
      produce<kHeadDim, kCausal>(&q_map, &k_map, &v_map, sh, heads, group, batch_heads, q_blocks,
                                 tiles, offset_blocks, kv_seq);
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();
  consume<kHeadDim, kCausal>(sh, out, lse, seq, heads, batch_heads, q_blocks, tiles,
                             offset_blocks, kv_seq, scale_log2);
#endif
}

template <int kHeadDim, bool kCausal>
void launch(Bf16* out, float* lse, const Bf16* q, const Bf16* k, const Bf16* v,
            const FlashAttentionShape& shape, int device, cudaStream_t stream) {
  constexpr std::size_t kBytes = Layout<kHeadDim>::kBytes;
  const CUtensorMap q_map =
      make_attention_tensor_map(q, kHeadDim, shape.heads, shape.seq, shape.batch, q_row_stride(shape), kBlockKeys);
  const int kv_seq = kv_seq_of(shape);
  const CUtensorMap k_map =
      make_attention_tensor_map(k, kHeadDim, shape.kv_heads, kv_seq, shape.batch, kv_row_stride(shape), kBlockKeys);
  const CUtensorMap v_map =
      make_attention_tensor_map(v, kHeadDim, shape.kv_heads, kv_seq, shape.batch, kv_row_stride(shape), kBlockKeys);
  int sms = 0;
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int q_blocks = (shape.seq + kBlockRows - 1) / kBlockRows;
  const int batch_heads = shape.batch * shape.heads;
  const int tiles = batch_heads * q_blocks;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_forward_sm90_kernel<kHeadDim, kCausal>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kBytes)));
  const float scale_log2 =
      static_cast<float>(1.4426950408889634 / std::sqrt(double(kHeadDim)));  // log2(e) / sqrt(d)
  // Non-causal: offset_blocks is unused (every tile starts at the last key block).
  const int offset_blocks = kCausal ? (kv_seq - shape.seq) / kBlockKeys : 0;
  flash_attention_forward_sm90_kernel<kHeadDim, kCausal>
      <<<std::min(tiles, sms), kThreads, kBytes, stream>>>(
          q_map, k_map, v_map, cuda_bf16(out), lse, shape.seq, shape.heads,
          shape.heads / shape.kv_heads, batch_heads, q_blocks, tiles, offset_blocks, kv_seq,
          scale_log2);
  SEXTANT_CHECK_LAUNCH("flash_attention_forward_sm90_kernel");
}

}  // namespace

// Declared in kernels/flash_attention.cu, which dispatches here.
bool flash_attention_forward_sm90_supports(const FlashAttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128) return false;
  // Causal: the diagonal must lie within one key block (file comment).
  const long long kv_seq = kv_seq_of(shape);
  if (shape.causal && (kv_seq - shape.seq) % kBlockKeys != 0) return false;
  // Tile indices are ints.
  const long long q_blocks = (static_cast<long long>(shape.seq) + kBlockRows - 1) / kBlockRows;
  if (static_cast<long long>(shape.batch) * shape.heads * q_blocks > INT_MAX) return false;
  // TMA strides must be below 2^40 bytes: Q's batch stride spans seq rows, K's and V's kv_seq.
  const long long widest = std::max(q_row_stride(shape), kv_row_stride(shape));
  const long long longest = std::max<long long>(shape.seq, kv_seq);
  return widest * static_cast<long long>(sizeof(__nv_bfloat16)) * longest < (1LL << 40);
}

void flash_attention_forward_sm90(Bf16* out, float* lse, const Bf16* q, const Bf16* k,
                                  const Bf16* v, const FlashAttentionShape& shape, int device,
                                  cudaStream_t stream) {
  if (shape.causal) {
    if (shape.head_dim == 64)
      launch<64, true>(out, lse, q, k, v, shape, device, stream);
    else
      launch<128, true>(out, lse, q, k, v, shape, device, stream);
  } else if (shape.head_dim == 64) {
    launch<64, false>(out, lse, q, k, v, shape, device, stream);
  } else {
    launch<128, false>(out, lse, q, k, v, shape, device, stream);
  }
}

}  // namespace sextant::kernels::detail
