// Flash attention forward, causal or not: FlashAttention-2 (Dao 2023), Algorithm 1,
// on the tensor cores through mma.sync m16n8k16 (kernels/flash_attention_mma.cuh).
// On compute capability 9.0 (H100, H200) flash_attention_forward runs the
// wgmma kernel of kernels/flash_attention_sm90.cu instead (449 against 253
// TFLOP/s at b=4, h=16, s=2048, d=128 on an H100); this one serves sm_80 and
// any other device.
//
// One thread block of 4 warps owns 64 query rows of one (batch, head); each
// warp owns 16 of them and keeps their Q fragments in registers. The block
// walks the key blocks of 64 from the diagonal down to 0; K and V tiles come
// through cp.async into two shared-memory stages, the next block's copy
// overlapping this block's products. Per key block, per warp:
//   S = Q K^T        (16, 64) fp32 in the mma C fragments; K read by ldmatrix
//   online softmax   on those registers (Algorithm 1, lines 8-10): lane l
//                    holds rows l/4 and l/4+8, so a row's max is a max over
//                    the lane's 16 values and two shuffles in its quad; the
//                    row sums stay per lane until the end
//   O += P V         P rounded to bf16 straight from the C fragments into A
//                    fragments (no shared memory); V read by ldmatrix.trans
// Scores are turned into log2 units at the exponential (one FFMA:
// s * scale*log2(e) - m * scale*log2(e)), so the exponentials are one ex2.approx each.
// With kv_seq > seq the queries are the last seq of kv_seq positions
// (bottom-right causal): query i sees keys j <= i + offset, offset = kv_seq -
// seq, computed once per block. A query block's walk starts at the last key
// block its last row sees and ends at key block 0; the blocks it masks are
// those that straddle its diagonal, processed first: one when offset is a
// multiple of 64 (the square case, offset 0, included), else two. (In the
// first of two, some rows may see no key; their running max stays -inf for
// that step, which the guard below turns into P = 0 and alpha = 0.)
//
// Non-causal (kCausal false, a second instantiation, so the causal kernel is
// unchanged): every query block walks every key block, from the last, and the
// one masked step is that first one, whose keys past kv_seq (zero-filled K
// rows, which would score 0) get -inf; no row is ever fully masked (the last
// key block holds key kv_seq - 1).
//
// Query blocks are launched heaviest first across all heads (grid z, the
// slowest, reversed: the last block sees every key), so the causal triangle's
// long blocks do not trail at the end of the grid. (Walking one head's blocks
// at a time instead shares K and V in the L2 better but starts the last heads'
// long blocks late: 10 % slower at b=4, h=16, s=2048, d=128 on an H100.)
#include "kernels/flash_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/flash_attention_mma.cuh"
#include "kernels/flash_attention_tiles.cuh"

namespace sextant::kernels {
namespace detail {
// The Hopper forward (kernels/flash_attention_sm90.cu): whether it takes
// `shape` (one that flash_attention_unsupported_reason accepts), and the
// launcher, for compute capability 9.0 devices only.
bool flash_attention_forward_sm90_supports(const FlashAttentionShape& shape);
void flash_attention_forward_sm90(Bf16* out, float* lse, const Bf16* q, const Bf16* k,
                                  const Bf16* v, const FlashAttentionShape& shape, int device,
                                  cudaStream_t stream);
}  // namespace detail

namespace {

using namespace detail::flash;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * detail::kWarpSize;
constexpr int kBlockRows = kWarps * kWarpRows;  // query rows per block
constexpr int kBlockKeys = 64;                  // keys per block
static_assert(kBlockRows == kBlockKeys, "only the diagonal key block needs the causal mask");
// Two blocks per SM, 8 warps: shared memory (68 KiB at d = 128) would allow
// three, but three need <= 168 registers per thread (222 without the bound)
// and ran 2-5 % slower (four at d = 64 too: 5 %) on an H100.
constexpr int kMinBlocksPerSm = 2;

template <int kHeadDim>
struct Layout {
  static constexpr std::size_t kTileElems = kPaddedTileElems<kBlockKeys, kHeadDim>;
  // Two stages of (K, V); Q arrives in stage 1's K tile and moves to
  // registers before stage 1 is first loaded.
  static constexpr std::size_t kBytes = 4 * kTileElems * sizeof(__nv_bfloat16);
};

// grid: (heads, batch, query blocks); block: kThreads.
template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    flash_attention_forward_kernel(__nv_bfloat16* __restrict__ out,      // (b, s, h, d)
                                   float* __restrict__ lse,              // (b, h, s)
                                   const __nv_bfloat16* __restrict__ q,  // (b*s, q_row_stride)
                                   const __nv_bfloat16* __restrict__ k,  // (b*kv_seq, kv_row_stride)
                                   const __nv_bfloat16* __restrict__ v,  // (b*kv_seq, kv_row_stride)
                                   int seq, int kv_seq, int heads, int kv_heads, long long q_row_stride,
                                   long long kv_row_stride, float scale_log2) {
  using L = Layout<kHeadDim>;
  constexpr int kDSteps = kHeadDim / 16;     // k-steps of Q K^T
  constexpr int kDTiles = kHeadDim / 8;      // n-tiles of O
  constexpr int kKeyTiles = kBlockKeys / 8;  // n-tiles of S
  constexpr int kKeySteps = kBlockKeys / 16; // k-steps of P V
  extern __shared__ __align__(128) unsigned char shared[];
  auto* kv_stages = reinterpret_cast<__nv_bfloat16*>(shared);  // stage s: K, then V, (64, d) each
  __nv_bfloat16* q_tile = kv_stages + 2 * L::kTileElems;       // (64, d), stage 1's K until step 1

  const int head = blockIdx.x;
  const int batch = blockIdx.y;
  const int q_block = gridDim.z - 1 - blockIdx.z;  // heaviest first
  const int kv_head = head / (heads / kv_heads);
  const __nv_bfloat16* q_base = q + static_cast<std::size_t>(batch) * seq * q_row_stride +
                                static_cast<std::size_t>(head) * kHeadDim;
  const std::size_t kv_offset = static_cast<std::size_t>(batch) * kv_seq * kv_row_stride +
                                static_cast<std::size_t>(kv_head) * kHeadDim;
  const __nv_bfloat16* k_base = k + kv_offset;
  const __nv_bfloat16* v_base = v + kv_offset;

  const int warp = threadIdx.x / detail::kWarpSize;
  const int lane = threadIdx.x % detail::kWarpSize;
  const int g = lane / 4;  // C fragment rows g and g + 8
  const int t = lane % 4;  // C fragment columns 2t, 2t + 1 of each n-tile
  const int first_row = q_block * kBlockRows;
  // Bottom-right causal: row i sees keys j <= i + offset. The block's first
  // row's last key, `diagonal`, decides the masks: key block kb straddles the
  // diagonal (needs the mask) iff its last key kb * 64 + 63 > diagonal, i.e.
  // kb >= (diagonal + 1) / 64. The walk starts at the key block of the last
  // key a real row of the block sees.
  // Non-causal: every key block, the last (partial or not) masked by kv_seq.
  const int diagonal = first_row + (kv_seq - seq);
  const int last_key_block =
      kCausal ? min(diagonal + kBlockRows - 1, kv_seq - 1) / kBlockKeys : (kv_seq - 1) / kBlockKeys;
  const int masked_steps = kCausal ? last_key_block - (diagonal + 1) / kBlockKeys + 1 : 1;

  auto load_kv = [&](int stage, int key_block) {
    __nv_bfloat16* k_tile = kv_stages + 2 * stage * L::kTileElems;
    load_tile_async<kBlockKeys, kHeadDim, kThreads>(k_tile, k_base, key_block * kBlockKeys, kv_seq,
                                                    kv_row_stride);
    load_tile_async<kBlockKeys, kHeadDim, kThreads>(k_tile + L::kTileElems, v_base,
                                                    key_block * kBlockKeys, kv_seq, kv_row_stride);
    cp_async_commit();
  };
  load_tile_async<kBlockRows, kHeadDim, kThreads>(q_tile, q_base, first_row, seq, q_row_stride);
  load_kv(0, last_key_block);  // one group with Q

  std::uint32_t q_frag[kDSteps][4];
  float o[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // running max of rows g, g + 8 (raw scores)
  float l[2] = {0.f, 0.f};              // this lane's part of the running sums

  for (int step = 0; step <= last_key_block; ++step) {
    const int key_block = last_key_block - step;
    cp_async_wait<0>();
    // This stage has landed for every thread, and every warp is done with the
    // other stage (read in the previous step), which the next copy overwrites.
    __syncthreads();
    if (step == 0) {
#pragma unroll
      for (int kk = 0; kk < kDSteps; ++kk)
        ldmatrix_x4(q_frag[kk], fragment_rows<kHeadDim>(q_tile, warp * kWarpRows, kk * 16, lane));
      __syncthreads();  // every warp holds its Q before stage 1 overwrites it
    }
    if (key_block > 0) load_kv((step + 1) % 2, key_block - 1);
    const __nv_bfloat16* k_tile = kv_stages + 2 * (step % 2) * L::kTileElems;
    const __nv_bfloat16* v_tile = k_tile + L::kTileElems;

    // S = Q K^T: (16, d) x (d, 64); B = K^T, so K's rows are B's columns.
    float s[kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk) {
#pragma unroll
      for (int np = 0; np < kKeyTiles / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4(b, transposed_b_rows<kHeadDim>(k_tile, np * 16, kk * 16, lane));
        mma_bf16(s[2 * np], q_frag[kk], b[0], b[1]);
        mma_bf16(s[2 * np + 1], q_frag[kk], b[2], b[3]);
      }
    }

    if (step < masked_steps) {
      if constexpr (kCausal) {
        // A block on the diagonal: key c of the block is masked for block row r
        // when key_block * 64 + c > first_row + r + offset (with offset 0 and
        // key_block == q_block: c > r).
        const int row = warp * kWarpRows + g + (diagonal - key_block * kBlockKeys);
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (n * 8 + 2 * t + (e % 2) > row + 8 * (e / 2)) s[n][e] = -INFINITY;
      } else {
        // The last key block: key c is masked when key_block * 64 + c >= kv_seq.
        const int keys = kv_seq - key_block * kBlockKeys;  // 1..64
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (n * 8 + 2 * t + (e % 2) >= keys) s[n][e] = -INFINITY;
      }
    }

    // Online softmax (Algorithm 1, lines 8-10) on rows g (e = 0, 1) and g + 8 (e = 2, 3).
    float m_new[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
      m_new[0] = fmaxf(m_new[0], fmaxf(s[n][0], s[n][1]));
      m_new[1] = fmaxf(m_new[1], fmaxf(s[n][2], s[n][3]));
    }
    float m_scaled[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The four lanes of a quad share the row.
      m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
      m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
      // -inf only while every key seen so far is masked for the row (the
      // first of two diagonal blocks); the guard keeps exp2(-inf - -inf) from
      // making a NaN: P = 0 and alpha = 0 then.
      m_scaled[r] = m_new[r] == -INFINITY ? 0.f : m_new[r] * scale_log2;
      alpha[r] = fast_exp2(m[r] * scale_log2 - m_scaled[r]);  // 0 on the first step
      m[r] = m_new[r];
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = fast_exp2(fmaf(s[n][e], scale_log2, -m_scaled[e / 2]));
        l[e / 2] += s[n][e];
      }
    // (Skipping this rescale when no row's max changed, behind an __any_sync,
    // made the kernel 4-5 % slower on an H100: the branch splits the step.)
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    // O += P V: (16, 64) x (64, d). P's C fragments of n-tiles 2j, 2j+1 are
    // the A fragment of k-step j; V is stored k-rows-first, read transposed.
#pragma unroll
    for (int j = 0; j < kKeySteps; ++j) {
      const std::uint32_t p[4] = {pack_bf16(s[2 * j][0], s[2 * j][1]),
                                  pack_bf16(s[2 * j][2], s[2 * j][3]),
                                  pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]),
                                  pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, fragment_rows<kHeadDim>(v_tile, j * 16, dp * 16, lane));
        mma_bf16(o[2 * dp], p, b[0], b[1]);
        mma_bf16(o[2 * dp + 1], p, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  // l >= 1: the row's own maximum contributes exp2(0).
  const float inv_l[2] = {1.f / l[0], 1.f / l[1]};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = first_row + warp * kWarpRows + g + 8 * r;
    if (row >= seq) continue;
    __nv_bfloat16* out_row = out + ((static_cast<std::size_t>(batch) * seq + row) * heads + head) *
                                       static_cast<std::size_t>(kHeadDim);
#pragma unroll
    for (int n = 0; n < kDTiles; ++n)
      *reinterpret_cast<std::uint32_t*>(out_row + n * 8 + 2 * t) =
          pack_bf16(o[n][2 * r] * inv_l[r], o[n][2 * r + 1] * inv_l[r]);
    if (t == 0)
      lse[(static_cast<std::size_t>(batch) * heads + head) * seq + row] =
          (m[r] * scale_log2 + log2f(l[r])) * kLn2;  // log2 units to natural
  }
}

template <int kHeadDim, bool kCausal>
void launch(Bf16* out, float* lse, const Bf16* q, const Bf16* k, const Bf16* v,
            const FlashAttentionShape& shape, cudaStream_t stream) {
  constexpr std::size_t kBytes = Layout<kHeadDim>::kBytes;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_forward_kernel<kHeadDim, kCausal>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kBytes)));
  const dim3 grid(shape.heads, shape.batch, (shape.seq + kBlockRows - 1) / kBlockRows);
  const float scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(double(kHeadDim)));  // log2(e) / sqrt(d)
  flash_attention_forward_kernel<kHeadDim, kCausal><<<grid, kThreads, kBytes, stream>>>(
      detail::cuda_bf16(out), lse, detail::cuda_bf16(q), detail::cuda_bf16(k),
      detail::cuda_bf16(v), shape.seq, kv_seq_of(shape), shape.heads, shape.kv_heads,
      q_row_stride(shape), kv_row_stride(shape), scale_log2);
  SEXTANT_CHECK_LAUNCH("flash_attention_forward_kernel");
}

}  // namespace

std::string flash_attention_unsupported_reason(const FlashAttentionShape& shape) {
  std::string reasons;
  auto add = [&reasons](const std::string& reason) {
    if (!reasons.empty()) reasons += "; ";
    reasons += reason;
  };
  // Grid y and z are limited to 65535 (CUDA programming guide, compute
  // capabilities table): batch is grid y, and the blocks of 64 query rows
  // (forward) or 128 keys (backward) along seq and kv_seq are grid z.
  constexpr int kMaxGridYZ = 65535;
  constexpr long long kMaxSeq = static_cast<long long>(kMaxGridYZ) * kBlockRows;
  constexpr int kBackwardBlockKeys = 128;  // kernels/flash_attention_backward.cu
  constexpr long long kMaxKvSeq = static_cast<long long>(kMaxGridYZ) * kBackwardBlockKeys;
  if (shape.head_dim != 64 && shape.head_dim != 128)
    add("head_dim (" + std::to_string(shape.head_dim) + ") must be 64 or 128");
  if (shape.batch < 1 || shape.batch > kMaxGridYZ)
    add("batch (" + std::to_string(shape.batch) + ") must be in [1, 65535]");
  if (shape.seq < 1)
    add("seq (" + std::to_string(shape.seq) + ") must be positive");
  else if (shape.seq > kMaxSeq)
    add("seq (" + std::to_string(shape.seq) + ") must be at most " + std::to_string(kMaxSeq));
  // Causal queries are the last seq of kv_seq positions; non-causal ones see
  // every key, any positive number of them.
  if (shape.causal && shape.kv_seq != 0 && shape.kv_seq < shape.seq)
    add("kv_seq (" + std::to_string(shape.kv_seq) + ") must be 0 (= seq) or at least seq (" +
        std::to_string(shape.seq) + ")");
  else if (!shape.causal && shape.kv_seq < 0)
    add("kv_seq (" + std::to_string(shape.kv_seq) + ") must be 0 (= seq) or positive (non-causal)");
  else if (shape.kv_seq > kMaxKvSeq)
    add("kv_seq (" + std::to_string(shape.kv_seq) + ") must be at most " + std::to_string(kMaxKvSeq));
  if (shape.heads < 1 || shape.heads > kMaxGridYZ)
    add("heads (" + std::to_string(shape.heads) + ") must be in [1, 65535]");
  if (shape.kv_heads < 1)
    add("kv_heads (" + std::to_string(shape.kv_heads) + ") must be positive");
  else if (shape.heads >= 1 && shape.heads % shape.kv_heads != 0)
    add("kv_heads (" + std::to_string(shape.kv_heads) + ") must divide heads (" +
        std::to_string(shape.heads) + ")");
  // Rows are read 16 bytes at a time: a stride of a multiple of 8 bf16 keeps
  // every row as aligned as the base pointer.
  auto check_stride = [&add](const char* name, int stride, long long width,
                             const char* width_name) {
    if (stride != 0 && (stride % 8 != 0 || stride < width))
      add(std::string(name) + " (" + std::to_string(stride) +
          ") must be 0 or a multiple of 8 no less than " + width_name + " (" +
          std::to_string(width) + ")");
  };
  check_stride("q_row_stride", shape.q_row_stride,
               static_cast<long long>(shape.heads) * shape.head_dim, "heads * head_dim");
  check_stride("kv_row_stride", shape.kv_row_stride,
               static_cast<long long>(shape.kv_heads) * shape.head_dim, "kv_heads * head_dim");
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
  // The wgmma kernel is compiled for sm_90a only, whose machine code runs on
  // compute capability 9.0 alone.
  int device = 0, major = 0, minor = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0 && detail::flash_attention_forward_sm90_supports(shape)) {
    detail::flash_attention_forward_sm90(out, lse, q, k, v, shape, device, stream);
    return;
  }
  if (shape.causal) {
    if (shape.head_dim == 64)
      launch<64, true>(out, lse, q, k, v, shape, stream);
    else
      launch<128, true>(out, lse, q, k, v, shape, stream);
  } else if (shape.head_dim == 64) {
    launch<64, false>(out, lse, q, k, v, shape, stream);
  } else {
    launch<128, false>(out, lse, q, k, v, shape, stream);
  }
}

}  // namespace sextant::kernels
