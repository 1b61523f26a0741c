// Causal flash attention forward on the tensor cores through nvcuda::wmma
// (16x16x16 bf16 fragments, fp32 accumulators).
//
// One thread block of 4 warps owns 64 query rows of one (batch, head); each
// warp owns 16 of them. For each block of 64 keys up to the diagonal:
//   S = Q K^T           wmma, per warp (16, 64), stored to the warp's scratch
//   online softmax      each lane owns half a row of S (32 values): running
//                       max m, running sum l, O rescaled by exp(m_old - m_new)
//   O += P V            P rounded to bf16 (the tensor cores' input type), the
//                       product through wmma into the scratch, then added into
//                       the lane's half row of O, held in registers
// Scores are kept in log2 units (scale * log2(e) folded in) so the exponentials
// are exp2f. The layout of wmma accumulator fragments is unspecified, which is
// why S and P V go through shared memory before a lane touches its row.
//
// Query blocks are launched heaviest first (the last block sees every key), so
// the causal triangle's long blocks do not trail at the end of the grid.
#include "kernels/flash_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstddef>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/flash_attention_tiles.cuh"

namespace sextant::kernels {
namespace {

namespace wmma = nvcuda::wmma;
namespace flash = detail::flash;
using namespace detail::flash;

template <int kHeadDim>
struct Layout {
  static constexpr int kTileLd = flash::kTileLd<kHeadDim>;
  static constexpr int kScratchLd = kWideLd<kHeadDim>;  // fp32, S (16, 64) then P V (16, d)
  static constexpr int kPLd = kKeyLd;                   // bf16, P (16, 64)
  static constexpr std::size_t kTileElems = flash::kTileElems<kHeadDim>;
  static constexpr std::size_t kScratchElems = static_cast<std::size_t>(kRowsPerWarp) * kScratchLd;
  static constexpr std::size_t kPElems = static_cast<std::size_t>(kRowsPerWarp) * kPLd;
  static constexpr std::size_t kBytes = 3 * kTileElems * sizeof(__nv_bfloat16) +
                                        kWarps * kScratchElems * sizeof(float) +
                                        kWarps * kPElems * sizeof(__nv_bfloat16);
};

// grid: (query blocks, heads, batch); block: kThreads.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    flash_attention_forward_kernel(__nv_bfloat16* __restrict__ out,      // (b, s, h, d)
                                   float* __restrict__ lse,              // (b, h, s)
                                   const __nv_bfloat16* __restrict__ q,  // (b, s, h, d)
                                   const __nv_bfloat16* __restrict__ k,  // (b, s, hkv, d)
                                   const __nv_bfloat16* __restrict__ v,  // (b, s, hkv, d)
                                   int seq, int heads, int kv_heads, float scale_log2) {
  using L = Layout<kHeadDim>;
  extern __shared__ __align__(128) unsigned char shared[];
  auto* q_tile = reinterpret_cast<__nv_bfloat16*>(shared);
  __nv_bfloat16* k_tile = q_tile + L::kTileElems;
  __nv_bfloat16* v_tile = k_tile + L::kTileElems;
  auto* scratch_all = reinterpret_cast<float*>(v_tile + L::kTileElems);
  auto* p_all = reinterpret_cast<__nv_bfloat16*>(scratch_all + kWarps * L::kScratchElems);

  const int q_block = gridDim.x - 1 - blockIdx.x;  // heaviest first
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int kv_head = head / (heads / kv_heads);
  const std::size_t q_row_stride = static_cast<std::size_t>(heads) * kHeadDim;
  const std::size_t kv_row_stride = static_cast<std::size_t>(kv_heads) * kHeadDim;
  const __nv_bfloat16* q_base = q + (static_cast<std::size_t>(batch) * seq * heads + head) * kHeadDim;
  const __nv_bfloat16* k_base =
      k + (static_cast<std::size_t>(batch) * seq * kv_heads + kv_head) * kHeadDim;
  const __nv_bfloat16* v_base =
      v + (static_cast<std::size_t>(batch) * seq * kv_heads + kv_head) * kHeadDim;

  const int warp = threadIdx.x / detail::kWarpSize;
  const int lane = threadIdx.x % detail::kWarpSize;
  float* scratch = scratch_all + warp * L::kScratchElems;  // (16, kScratchLd)
  __nv_bfloat16* p_tile = p_all + warp * L::kPElems;       // (16, kPLd)

  // Lane layout for the element-wise work: row r of the warp's 16, and of that
  // row the 4-column groups 8j + 4*half (j = 0, 1, ...), so the two lanes of a
  // row read adjacent 16-byte chunks.
  const int r = lane / 2;
  const int half = lane % 2;
  const int row = q_block * kBlockRows + warp * kRowsPerWarp + r;  // query index

  load_tile<kHeadDim>(q_tile, q_base, q_block * kBlockRows, seq, q_row_stride);

  constexpr int kOGroups = kHeadDim / 8;  // 4-wide groups of O per lane
  float o[kOGroups * 4];
#pragma unroll
  for (int i = 0; i < kOGroups * 4; ++i) o[i] = 0.f;
  float m = -INFINITY;  // running max, log2 units
  float l = 0.f;        // running sum of exp2(t - m)

  for (int key_block = 0; key_block <= q_block; ++key_block) {
    __syncthreads();  // every warp is done with the previous K, V (and Q is loaded)
    load_tile<kHeadDim>(k_tile, k_base, key_block * kBlockKeys, seq, kv_row_stride);
    load_tile<kHeadDim>(v_tile, v_base, key_block * kBlockKeys, seq, kv_row_stride);
    __syncthreads();

    // S = Q K^T: (16, d) x (d, 64). K is row-major (key, d), i.e. K^T col-major.
    {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> s_frag[kBlockKeys / kFrag];
#pragma unroll
      for (int j = 0; j < kBlockKeys / kFrag; ++j) wmma::fill_fragment(s_frag[j], 0.f);
#pragma unroll
      for (int kk = 0; kk < kHeadDim / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> a;
        wmma::load_matrix_sync(a, q_tile + warp * kRowsPerWarp * L::kTileLd + kk * kFrag,
                               L::kTileLd);
#pragma unroll
        for (int j = 0; j < kBlockKeys / kFrag; ++j) {
          wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::col_major> b;
          wmma::load_matrix_sync(b, k_tile + j * kFrag * L::kTileLd + kk * kFrag, L::kTileLd);
          wmma::mma_sync(s_frag[j], a, b, s_frag[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < kBlockKeys / kFrag; ++j)
        wmma::store_matrix_sync(scratch + j * kFrag, s_frag[j], L::kScratchLd, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax over this lane's 32 scores of row r.
    const bool needs_mask = key_block == q_block || (key_block + 1) * kBlockKeys > seq;
    float t[kBlockKeys / 2];
    float block_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j) {
      const float4 s4 = *reinterpret_cast<const float4*>(scratch + r * L::kScratchLd + 8 * j + 4 * half);
      const float s[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key_block * kBlockKeys + 8 * j + 4 * half + e;
        float value = s[e] * scale_log2;
        if (needs_mask && (key > row || key >= seq)) value = -INFINITY;
        t[4 * j + e] = value;
        block_max = fmaxf(block_max, value);
      }
    }
    block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
    const float m_new = fmaxf(m, block_max);
    // A row with every score masked so far (only padding rows past seq) keeps
    // m = -inf; subtracting 0 instead avoids inf - inf.
    const float m_ref = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = exp2f(m - m_ref);
    float block_sum = 0.f;
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(t[4 * j + e] - m_ref);
        block_sum += p[e];
      }
      auto* dst = reinterpret_cast<__nv_bfloat162*>(p_tile + r * L::kPLd + 8 * j + 4 * half);
      dst[0] = __floats2bfloat162_rn(p[0], p[1]);
      dst[1] = __floats2bfloat162_rn(p[2], p[3]);
    }
    block_sum += __shfl_xor_sync(0xffffffffu, block_sum, 1);
    l = l * alpha + block_sum;
    m = m_new;
    __syncwarp();  // P written, S read: the scratch may now take P V

    // P V: (16, 64) x (64, d), V row-major (key, d).
    {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> pv[kHeadDim / kFrag];
#pragma unroll
      for (int n = 0; n < kHeadDim / kFrag; ++n) wmma::fill_fragment(pv[n], 0.f);
#pragma unroll
      for (int kk = 0; kk < kBlockKeys / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> a;
        wmma::load_matrix_sync(a, p_tile + kk * kFrag, L::kPLd);
#pragma unroll
        for (int n = 0; n < kHeadDim / kFrag; ++n) {
          wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> b;
          wmma::load_matrix_sync(b, v_tile + kk * kFrag * L::kTileLd + n * kFrag, L::kTileLd);
          wmma::mma_sync(pv[n], a, b, pv[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < kHeadDim / kFrag; ++n)
        wmma::store_matrix_sync(scratch + n * kFrag, pv[n], L::kScratchLd, wmma::mem_row_major);
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kOGroups; ++j) {
      const float4 add = *reinterpret_cast<const float4*>(scratch + r * L::kScratchLd + 8 * j + 4 * half);
      o[4 * j + 0] = o[4 * j + 0] * alpha + add.x;
      o[4 * j + 1] = o[4 * j + 1] * alpha + add.y;
      o[4 * j + 2] = o[4 * j + 2] * alpha + add.z;
      o[4 * j + 3] = o[4 * j + 3] * alpha + add.w;
    }
    __syncwarp();  // scratch read before the next step's S lands in it
  }

  if (row >= seq) return;
  const float inv_l = 1.f / l;  // l >= 1: the row's own maximum contributes exp2(0)
  __nv_bfloat16* out_row = out + (static_cast<std::size_t>(batch) * seq + row) * q_row_stride +
                           static_cast<std::size_t>(head) * kHeadDim;
#pragma unroll
  for (int j = 0; j < kOGroups; ++j) {
    auto* dst = reinterpret_cast<__nv_bfloat162*>(out_row + 8 * j + 4 * half);
    dst[0] = __floats2bfloat162_rn(o[4 * j + 0] * inv_l, o[4 * j + 1] * inv_l);
    dst[1] = __floats2bfloat162_rn(o[4 * j + 2] * inv_l, o[4 * j + 3] * inv_l);
  }
  if (half == 0)
    lse[(static_cast<std::size_t>(batch) * heads + head) * seq + row] =
        (m + log2f(l)) * kLn2;  // log2 units to natural
}

template <int kHeadDim>
void launch(Bf16* out, float* lse, const Bf16* q, const Bf16* k, const Bf16* v,
            const FlashAttentionShape& shape, cudaStream_t stream) {
  constexpr std::size_t kBytes = Layout<kHeadDim>::kBytes;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_forward_kernel<kHeadDim>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kBytes)));
  const dim3 grid((shape.seq + kBlockRows - 1) / kBlockRows, shape.heads, shape.batch);
  const float scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(double(kHeadDim)));  // log2(e) / sqrt(d)
  flash_attention_forward_kernel<kHeadDim><<<grid, kThreads, kBytes, stream>>>(
      detail::cuda_bf16(out), lse, detail::cuda_bf16(q), detail::cuda_bf16(k),
      detail::cuda_bf16(v), shape.seq, shape.heads, shape.kv_heads, scale_log2);
  SEXTANT_CHECK_LAUNCH("flash_attention_forward_kernel");
}

}  // namespace

std::string flash_attention_unsupported_reason(const FlashAttentionShape& shape) {
  std::string reasons;
  auto add = [&reasons](const std::string& reason) {
    if (!reasons.empty()) reasons += "; ";
    reasons += reason;
  };
  // Grid y and z are limited to 65535 (CUDA programming guide, compute capabilities table).
  constexpr int kMaxGridYZ = 65535;
  if (shape.head_dim != 64 && shape.head_dim != 128)
    add("head_dim (" + std::to_string(shape.head_dim) + ") must be 64 or 128");
  if (shape.batch < 1 || shape.batch > kMaxGridYZ)
    add("batch (" + std::to_string(shape.batch) + ") must be in [1, 65535]");
  if (shape.seq < 1) add("seq (" + std::to_string(shape.seq) + ") must be positive");
  if (shape.heads < 1 || shape.heads > kMaxGridYZ)
    add("heads (" + std::to_string(shape.heads) + ") must be in [1, 65535]");
  if (shape.kv_heads < 1)
    add("kv_heads (" + std::to_string(shape.kv_heads) + ") must be positive");
  else if (shape.heads >= 1 && shape.heads % shape.kv_heads != 0)
    add("kv_heads (" + std::to_string(shape.kv_heads) + ") must divide heads (" +
        std::to_string(shape.heads) + ")");
  return reasons;
}

void flash_attention_forward(Bf16* out, float* lse, const Bf16* q, const Bf16* k, const Bf16* v,
                             const FlashAttentionShape& shape, cudaStream_t stream) {
  constexpr const char* kName = "flash_attention_forward";
  const std::string reason = flash_attention_unsupported_reason(shape);
  require_argument(reason.empty(), kName, reason);
  require_argument(out != nullptr && lse != nullptr && q != nullptr && k != nullptr && v != nullptr,
                   kName, "out, lse, q, k and v must not be null");
  require_argument(is_aligned(out, 16) && is_aligned(q, 16) && is_aligned(k, 16) &&
                       is_aligned(v, 16),
                   kName, "out, q, k and v must be 16-byte aligned (16-byte row loads)");
  if (shape.head_dim == 64)
    launch<64>(out, lse, q, k, v, shape, stream);
  else
    launch<128>(out, lse, q, k, v, shape, stream);
}

}  // namespace sextant::kernels
