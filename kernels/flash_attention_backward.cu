// Causal flash attention backward (FlashAttention-2, Dao 2023, Algorithm 2)
// on the tensor cores through nvcuda::wmma.
//
// Three launches:
//   1. delta_i = dO_i . O_i per query row (fp32), the softmax backward's row term.
//   2. One thread block of 4 warps per block of 64 keys of one key/value head;
//      each warp owns 16 of the keys. The block walks every query head of its
//      GQA group and every query block at or below the diagonal, recomputing
//        P^T  = exp(K Q^T * scale - lse)                 (16 keys, 64 queries)
//        dP^T = V dO^T
//        dS^T = P^T * (dP^T - delta)
//      and accumulating dV += P^T dO and dK += dS^T Q in wmma accumulator
//      fragments (registers) across all of them, so dK and dV are written
//      once, summed over the group, without atomics. dQ += dS K needs every
//      key block's contribution, so it goes to an fp32 buffer by atomicAdd.
//   3. dQ: fp32 buffer to bf16.
// The transposed orientation (keys as rows) is the one where dK and dV are
// plain row-major accumulators; dQ then reads dS^T as a column-major operand.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_tiles.cuh"

namespace sextant::kernels {
namespace {

namespace wmma = nvcuda::wmma;
namespace flash = detail::flash;
using namespace detail::flash;

template <int kHeadDim>
struct Layout {
  static constexpr int kTileLd = flash::kTileLd<kHeadDim>;
  static constexpr std::size_t kTileElems = flash::kTileElems<kHeadDim>;   // K, V, Q, dO
  static constexpr std::size_t kKeyTileElems = static_cast<std::size_t>(kBlockKeys) * kKeyLd;  // P^T, dS^T
  static constexpr std::size_t kScoreElems = static_cast<std::size_t>(kRowsPerWarp) * kKeyLd;  // per warp, S^T
  static constexpr std::size_t kWideElems =
      static_cast<std::size_t>(kRowsPerWarp) * kWideLd<kHeadDim>;  // per warp, dP^T / dQ / dK / dV rows
  // K, V, and two buffers each of Q and dO (the next query block loads while
  // this one is used), P^T, dS^T, two buffers of lse and delta, per-warp scratch.
  static constexpr std::size_t kBytes = 6 * kTileElems * sizeof(__nv_bfloat16) +
                                        2 * kKeyTileElems * sizeof(__nv_bfloat16) +
                                        4 * kBlockRows * sizeof(float) +
                                        kWarps * (kScoreElems + kWideElems) * sizeof(float);
};

constexpr int kDeltaThreads = 256;

// One warp per (batch, query, head) row; delta: (b, h, s).
template <int kHeadDim>
__global__ void __launch_bounds__(kDeltaThreads)
    flash_attention_delta_kernel(float* __restrict__ delta,                  // (b, h, s)
                                 const __nv_bfloat16* __restrict__ dout,     // (b, s, h, d)
                                 const __nv_bfloat16* __restrict__ out,      // (b, s, h, d)
                                 long long rows, int seq, int heads) {
  const long long row = (static_cast<long long>(blockIdx.x) * kDeltaThreads + threadIdx.x) /
                        detail::kWarpSize;
  const int lane = threadIdx.x % detail::kWarpSize;
  if (row >= rows) return;
  float sum = 0.f;
  if (lane < kHeadDim / detail::kBf16PerVector) {
    float a[8], b[8];
    detail::load_bf16x8(dout + row * kHeadDim + lane * detail::kBf16PerVector, a);
    detail::load_bf16x8(out + row * kHeadDim + lane * detail::kBf16PerVector, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += a[i] * b[i];
  }
  sum = detail::warp_sum(sum);
  if (lane == 0) {
    const int head = static_cast<int>(row % heads);
    const long long batch_query = row / heads;
    const long long query = batch_query % seq;
    const long long batch = batch_query / seq;
    delta[(batch * heads + head) * seq + query] = sum;
  }
}

// grid: (key blocks, kv_heads, batch); block: kThreads.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    flash_attention_backward_kernel(__nv_bfloat16* __restrict__ dk,         // (b, s, hkv, d)
                                    __nv_bfloat16* __restrict__ dv,         // (b, s, hkv, d)
                                    float* __restrict__ dq_accum,           // (b, s, h, d), +=
                                    const __nv_bfloat16* __restrict__ dout, // (b, s, h, d)
                                    const __nv_bfloat16* __restrict__ q,    // (b, s, h, d)
                                    const __nv_bfloat16* __restrict__ k,    // (b, s, hkv, d)
                                    const __nv_bfloat16* __restrict__ v,    // (b, s, hkv, d)
                                    const float* __restrict__ lse,          // (b, h, s)
                                    const float* __restrict__ delta,        // (b, h, s)
                                    int seq, int heads, int kv_heads, float scale,
                                    float scale_log2) {
  using L = Layout<kHeadDim>;
  constexpr int kLd = L::kTileLd;
  constexpr int kWide = kWideLd<kHeadDim>;
  constexpr int kDTiles = kHeadDim / kFrag;
  extern __shared__ __align__(128) unsigned char shared[];
  auto* k_tile = reinterpret_cast<__nv_bfloat16*>(shared);  // (64 keys, d)
  __nv_bfloat16* v_tile = k_tile + L::kTileElems;           // (64 keys, d)
  __nv_bfloat16* q_tiles = v_tile + L::kTileElems;          // 2 x (64 queries, d)
  __nv_bfloat16* do_tiles = q_tiles + 2 * L::kTileElems;    // 2 x (64 queries, d)
  __nv_bfloat16* pt_tile = do_tiles + 2 * L::kTileElems;    // (64 keys, 64 queries)
  __nv_bfloat16* dst_tile = pt_tile + L::kKeyTileElems;     // (64 keys, 64 queries)
  auto* lse_tiles = reinterpret_cast<float*>(dst_tile + L::kKeyTileElems);  // 2 x (64 queries)
  float* delta_tiles = lse_tiles + 2 * kBlockRows;                           // 2 x (64 queries)
  float* scratch_all = delta_tiles + 2 * kBlockRows;

  const int key_block = blockIdx.x;  // block 0 sees every query block: launched first
  const int kv_head = blockIdx.y;
  const int batch = blockIdx.z;
  const int group = heads / kv_heads;
  const int query_blocks = (seq + kBlockRows - 1) / kBlockRows;
  const std::size_t q_row_stride = static_cast<std::size_t>(heads) * kHeadDim;
  const std::size_t kv_row_stride = static_cast<std::size_t>(kv_heads) * kHeadDim;
  const std::size_t kv_offset = (static_cast<std::size_t>(batch) * seq * kv_heads + kv_head) * kHeadDim;

  const int warp = threadIdx.x / detail::kWarpSize;
  const int lane = threadIdx.x % detail::kWarpSize;
  float* scores = scratch_all + warp * (L::kScoreElems + L::kWideElems);  // (16, kKeyLd)
  float* wide = scores + L::kScoreElems;                                  // (16, kWide)
  // Element-wise lane layout as in the forward: row r of the warp's 16, column
  // groups 8j + 4*half.
  const int r = lane / 2;
  const int half = lane % 2;
  const int key_in_block = warp * kRowsPerWarp + r;

  load_tile<kHeadDim>(k_tile, k + kv_offset, key_block * kBlockKeys, seq, kv_row_stride);
  load_tile<kHeadDim>(v_tile, v + kv_offset, key_block * kBlockKeys, seq, kv_row_stride);

  wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> dk_acc[kDTiles], dv_acc[kDTiles];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.f);
    wmma::fill_fragment(dv_acc[n], 0.f);
  }

  // The (query head, query block) pairs this block visits, in order: every head
  // of the GQA group, query blocks from the diagonal down. Item i's Q, dO, lse
  // and delta go to buffer i % 2; item i + 1's load while item i is used.
  const int blocks_per_head = query_blocks - key_block;
  const int items = group * blocks_per_head;
  auto issue = [&](int item) {
    const int buffer = item % 2;
    const int head = kv_head * group + item / blocks_per_head;
    const int q_block = key_block + item % blocks_per_head;
    const std::size_t offset = (static_cast<std::size_t>(batch) * seq * heads + head) * kHeadDim;
    load_tile_async<kHeadDim>(q_tiles + buffer * L::kTileElems, q + offset, q_block * kBlockRows, seq,
                              q_row_stride);
    load_tile_async<kHeadDim>(do_tiles + buffer * L::kTileElems, dout + offset, q_block * kBlockRows,
                              seq, q_row_stride);
    if (threadIdx.x < kBlockRows) {
      const std::size_t rows = (static_cast<std::size_t>(batch) * heads + head) * seq;
      const int query = q_block * kBlockRows + threadIdx.x;
      // A padding query gets lse = +inf, hence P = 0 and dS = 0.
      lse_tiles[buffer * kBlockRows + threadIdx.x] = query < seq ? lse[rows + query] * kLog2e : INFINITY;
      delta_tiles[buffer * kBlockRows + threadIdx.x] = query < seq ? delta[rows + query] : 0.f;
    }
    cp_async_commit();
  };
  if (items > 0) issue(0);

  for (int item = 0; item < items; ++item) {
    const int head = kv_head * group + item / blocks_per_head;
    const int q_block = key_block + item % blocks_per_head;
    const std::size_t q_offset = (static_cast<std::size_t>(batch) * seq * heads + head) * kHeadDim;
    const __nv_bfloat16* q_tile = q_tiles + (item % 2) * L::kTileElems;
    const __nv_bfloat16* do_tile = do_tiles + (item % 2) * L::kTileElems;
    const float* lse_log2 = lse_tiles + (item % 2) * kBlockRows;
    const float* delta_tile = delta_tiles + (item % 2) * kBlockRows;
    __syncthreads();  // every warp is done with item - 1, whose buffer item + 1 reuses
    if (item + 1 < items) {
      issue(item + 1);
      cp_async_wait<1>();  // item's group has landed; item + 1's may still fly
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys: (16, d) x (d, 64).
#pragma unroll
    for (int j = 0; j < kBlockRows / kFrag; ++j) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> s_frag, dp_frag;
      wmma::fill_fragment(s_frag, 0.f);
      wmma::fill_fragment(dp_frag, 0.f);
#pragma unroll
      for (int kk = 0; kk < kDTiles; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, k_tile + warp * kRowsPerWarp * kLd + kk * kFrag, kLd);
        wmma::load_matrix_sync(b, q_tile + j * kFrag * kLd + kk * kFrag, kLd);
        wmma::mma_sync(s_frag, a, b, s_frag);
        wmma::load_matrix_sync(a, v_tile + warp * kRowsPerWarp * kLd + kk * kFrag, kLd);
        wmma::load_matrix_sync(b, do_tile + j * kFrag * kLd + kk * kFrag, kLd);
        wmma::mma_sync(dp_frag, a, b, dp_frag);
      }
      wmma::store_matrix_sync(scores + j * kFrag, s_frag, kKeyLd, wmma::mem_row_major);
      wmma::store_matrix_sync(wide + j * kFrag, dp_frag, kWide, wmma::mem_row_major);
    }
    __syncwarp();

    // P^T and dS^T, rounded to bf16 for the products that follow.
    const bool diagonal = q_block == key_block;
#pragma unroll
    for (int j = 0; j < kBlockRows / 8; ++j) {
      const int col = 8 * j + 4 * half;
      const float4 s4 = *reinterpret_cast<const float4*>(scores + r * kKeyLd + col);
      const float4 dp4 = *reinterpret_cast<const float4*>(wide + r * kWide + col);
      const float s[4] = {s4.x, s4.y, s4.z, s4.w};
      const float dp[4] = {dp4.x, dp4.y, dp4.z, dp4.w};
      float p[4], ds[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[e] * scale_log2 - lse_log2[col + e]);
        if (diagonal && col + e < key_in_block) p[e] = 0.f;  // query before key: masked
        ds[e] = p[e] * (dp[e] - delta_tile[col + e]);
      }
      auto* p_dst = reinterpret_cast<__nv_bfloat162*>(pt_tile + key_in_block * kKeyLd + col);
      p_dst[0] = __floats2bfloat162_rn(p[0], p[1]);
      p_dst[1] = __floats2bfloat162_rn(p[2], p[3]);
      auto* ds_dst = reinterpret_cast<__nv_bfloat162*>(dst_tile + key_in_block * kKeyLd + col);
      ds_dst[0] = __floats2bfloat162_rn(ds[0], ds[1]);
      ds_dst[1] = __floats2bfloat162_rn(ds[2], ds[3]);
    }
    __syncwarp();

    // dV += P^T dO and dK += dS^T Q: (16, 64) x (64, d).
#pragma unroll
    for (int kk = 0; kk < kBlockRows / kFrag; ++kk) {
      wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> a_p, a_ds;
      wmma::load_matrix_sync(a_p, pt_tile + warp * kRowsPerWarp * kKeyLd + kk * kFrag, kKeyLd);
      wmma::load_matrix_sync(a_ds, dst_tile + warp * kRowsPerWarp * kKeyLd + kk * kFrag, kKeyLd);
#pragma unroll
      for (int n = 0; n < kDTiles; ++n) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(b, do_tile + kk * kFrag * kLd + n * kFrag, kLd);
        wmma::mma_sync(dv_acc[n], a_p, b, dv_acc[n]);
        wmma::load_matrix_sync(b, q_tile + kk * kFrag * kLd + n * kFrag, kLd);
        wmma::mma_sync(dk_acc[n], a_ds, b, dk_acc[n]);
      }
    }
    __syncthreads();  // every warp's rows of dS^T are in place

    // dQ for the warp's 16 queries: dS (16, 64 keys) x K (64 keys, d); dS is
    // dS^T read column-major.
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> dq_frag;
      wmma::fill_fragment(dq_frag, 0.f);
#pragma unroll
      for (int kk = 0; kk < kBlockKeys / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::col_major> a;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, dst_tile + kk * kFrag * kKeyLd + warp * kRowsPerWarp, kKeyLd);
        wmma::load_matrix_sync(b, k_tile + kk * kFrag * kLd + n * kFrag, kLd);
        wmma::mma_sync(dq_frag, a, b, dq_frag);
      }
      wmma::store_matrix_sync(wide + n * kFrag, dq_frag, kWide, wmma::mem_row_major);
    }
    __syncwarp();
    const int query = q_block * kBlockRows + warp * kRowsPerWarp + r;
    if (query < seq) {
      float* dq_row = dq_accum + q_offset + static_cast<std::size_t>(query) * q_row_stride;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        const int col = 8 * j + 4 * half;
        const float4 add = *reinterpret_cast<const float4*>(wide + r * kWide + col);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // Hopper adds four floats in one atomic (CUDA Programming Guide,
        // atomicAdd for float4, compute capability 9.x, global memory).
        atomicAdd(reinterpret_cast<float4*>(dq_row + col),
                  make_float4(add.x * scale, add.y * scale, add.z * scale, add.w * scale));
#else
        atomicAdd(dq_row + col + 0, add.x * scale);
        atomicAdd(dq_row + col + 1, add.y * scale);
        atomicAdd(dq_row + col + 2, add.z * scale);
        atomicAdd(dq_row + col + 3, add.w * scale);
#endif
      }
    }
    // `wide` is next written after the loop's leading __syncthreads.
  }

  // Write dK (times the softmax scale) and dV through the warp's scratch rows.
  const int key = key_block * kBlockKeys + key_in_block;
  const std::size_t out_offset = kv_offset + static_cast<std::size_t>(key) * kv_row_stride;
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    __syncwarp();
#pragma unroll
    for (int n = 0; n < kDTiles; ++n)
      wmma::store_matrix_sync(wide + n * kFrag, which == 0 ? dk_acc[n] : dv_acc[n], kWide,
                              wmma::mem_row_major);
    __syncwarp();
    if (key < seq) {
      __nv_bfloat16* dst = (which == 0 ? dk : dv) + out_offset;
      const float factor = which == 0 ? scale : 1.f;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        const int col = 8 * j + 4 * half;
        const float4 x = *reinterpret_cast<const float4*>(wide + r * kWide + col);
        auto* pair = reinterpret_cast<__nv_bfloat162*>(dst + col);
        pair[0] = __floats2bfloat162_rn(x.x * factor, x.y * factor);
        pair[1] = __floats2bfloat162_rn(x.z * factor, x.w * factor);
      }
    }
  }
}

constexpr int kConvertThreads = 256;

// n % 8 == 0; 8 elements per thread.
__global__ void __launch_bounds__(kConvertThreads)
    fp32_to_bf16_kernel(__nv_bfloat16* __restrict__ dst, const float* __restrict__ src,
                        std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kConvertThreads * 8;
  for (std::size_t i = (static_cast<std::size_t>(blockIdx.x) * kConvertThreads + threadIdx.x) * 8;
       i < n; i += stride) {
    const float4 a = *reinterpret_cast<const float4*>(src + i);
    const float4 b = *reinterpret_cast<const float4*>(src + i + 4);
    const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    detail::store_bf16x8(dst + i, x);
  }
}

std::size_t dq_accum_elems(const FlashAttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * s.seq * s.heads * s.head_dim;
}

template <int kHeadDim>
void launch_backward(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q, const Bf16* k,
                     const Bf16* v, const Bf16* out, const float* lse,
                     const FlashAttentionShape& shape, float* dq_accum, float* delta,
                     cudaStream_t stream) {
  const std::size_t n = dq_accum_elems(shape);
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, n * sizeof(float), stream));

  const long long rows = static_cast<long long>(shape.batch) * shape.seq * shape.heads;
  constexpr int kRowsPerBlock = kDeltaThreads / detail::kWarpSize;
  flash_attention_delta_kernel<kHeadDim>
      <<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), kDeltaThreads, 0,
         stream>>>(delta, detail::cuda_bf16(dout), detail::cuda_bf16(out), rows, shape.seq,
                   shape.heads);
  SEXTANT_CHECK_LAUNCH("flash_attention_delta_kernel");

  constexpr std::size_t kBytes = Layout<kHeadDim>::kBytes;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_backward_kernel<kHeadDim>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kBytes)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  const dim3 grid((shape.seq + kBlockKeys - 1) / kBlockKeys, shape.kv_heads, shape.batch);
  flash_attention_backward_kernel<kHeadDim><<<grid, kThreads, kBytes, stream>>>(
      detail::cuda_bf16(dk), detail::cuda_bf16(dv), dq_accum, detail::cuda_bf16(dout),
      detail::cuda_bf16(q), detail::cuda_bf16(k), detail::cuda_bf16(v), lse, delta, shape.seq,
      shape.heads, shape.kv_heads, static_cast<float>(scale),
      static_cast<float>(scale * 1.4426950408889634));  // log2(e) / sqrt(d)
  SEXTANT_CHECK_LAUNCH("flash_attention_backward_kernel");

  // Enough blocks to fill any GPU several times over; the loop covers the rest.
  const std::size_t threads_needed = n / 8;
  const unsigned blocks = static_cast<unsigned>(
      std::min<std::size_t>((threads_needed + kConvertThreads - 1) / kConvertThreads, 1u << 16));
  fp32_to_bf16_kernel<<<blocks, kConvertThreads, 0, stream>>>(detail::cuda_bf16(dq), dq_accum, n);
  SEXTANT_CHECK_LAUNCH("fp32_to_bf16_kernel");
}

}  // namespace

std::size_t flash_attention_backward_workspace_bytes(const FlashAttentionShape& shape) {
  if (!flash_attention_unsupported_reason(shape).empty()) return 0;
  const std::size_t rows = static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq;
  // The delta rows follow dQ; dQ's size is a multiple of 64 floats, so delta stays aligned.
  return (dq_accum_elems(shape) + rows) * sizeof(float);
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
  auto* dq_accum = static_cast<float*>(workspace);
  float* delta = dq_accum + dq_accum_elems(shape);
  if (shape.head_dim == 64)
    launch_backward<64>(dq, dk, dv, dout, q, k, v, out, lse, shape, dq_accum, delta, stream);
  else
    launch_backward<128>(dq, dk, dv, dout, q, k, v, out, lse, shape, dq_accum, delta, stream);
}

}  // namespace sextant::kernels
