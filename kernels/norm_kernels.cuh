// The kernels behind layernorm.cu and rmsnorm.cu. RMSNorm is LayerNorm without
// the centering and the bias (Zhang & Sennrich 2019), so one template serves
// both: kCentered = true is LayerNorm.
//
// Layout: rows of `cols` bf16 values, row-major, cols % 8 == 0 and 16-byte
// aligned rows (checked by the launchers). Statistics are fp32.
//
// One warp per row. The forward holds rows of up to 2048 columns
// (kMaxRegisterVectors x 256) in registers, all of a lane's 16-byte loads
// issued back to back, and every pass works from there; the backward does the
// same for rows of up to kNormBackwardMaxSummedCols in one fused pass that also
// sums the parameter gradients. Wider rows loop over memory, re-reading the row
// (from L1 when it stays there), with the parameter gradients in a kernel of
// their own. Column sums go through column_partials.h to stay deterministic.
#pragma once

#include <string>

#include "kernels/column_partials.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm.h"  // NormBackwardOptions
#include "kernels/stream.h"

namespace sextant::kernels::detail {

inline constexpr int kNormThreads = 256;  // 8 warps = 8 rows per block
inline constexpr int kNormRowsPerBlock = kNormThreads / kWarpSize;
inline constexpr int kColsPerWarpStep = kWarpSize * kBf16PerVector;  // 256

// The launchers' shape check, shared by LayerNorm and RMSNorm.
inline void check_norm_shape(const char* launcher, int rows, int cols) {
  require_argument(rows >= 0 && rows <= kMaxColumnPartialRows, launcher,
                   "rows (" + std::to_string(rows) + ") must be in [0, " +
                       std::to_string(kMaxColumnPartialRows) + "]");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, launcher,
                   "cols (" + std::to_string(cols) +
                       ") must be a positive multiple of 8 (16-byte vector accesses)");
}

template <bool kCentered>
__global__ void __launch_bounds__(kNormThreads)
    norm_forward_kernel(__nv_bfloat16* out, float* mean_out, float* rstd_out,
                        const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                        const __nv_bfloat16* beta, int rows, int cols, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const __nv_bfloat16* x = inp + row * cols;
  __nv_bfloat16* y = out + row * cols;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  float mean = 0.0f;
  if constexpr (kCentered) {
    float sum = 0.0f;
    for (int c = lane * kBf16PerVector; c < cols; c += kColsPerWarpStep) {
      float v[8];
      load_bf16x8(x + c, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += v[i];
    }
    mean = warp_sum(sum) * inv_cols;
  }
  // Two passes (mean, then squared deviations) rather than E[x^2]-E[x]^2,
  // which cancels catastrophically when |mean| >> std.
  float squares = 0.0f;
  for (int c = lane * kBf16PerVector; c < cols; c += kColsPerWarpStep) {
    float v[8];
    load_bf16x8(x + c, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float d = v[i] - mean;
      squares += d * d;
    }
  }
  const float rstd = rsqrtf(warp_sum(squares) * inv_cols + eps);

  for (int c = lane * kBf16PerVector; c < cols; c += kColsPerWarpStep) {
    float v[8], g[8], b[8] = {};
    load_bf16x8(x + c, v);
    load_bf16x8(gamma + c, g);
    if (kCentered && beta != nullptr) load_bf16x8(beta + c, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (v[i] - mean) * rstd * g[i] + b[i];
    store_bf16x8(y + c, v);
  }
  if (lane == 0) {
    if (kCentered && mean_out != nullptr) mean_out[row] = mean;
    if (rstd_out != nullptr) rstd_out[row] = rstd;
  }
}

// dinp = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * gamma;
// One 8-element vector of the input-gradient passes, shared by the looping and
// fused kernels: the row sums of dxhat = dy·gamma and dxhat·xhat ...
__device__ __forceinline__ void accumulate_dxhat_sums(const float (&dy)[8], const float (&x)[8],
                                                      const float (&g)[8], float m, float r,
                                                      float& sum_dxhat, float& sum_dxhat_xhat) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float dxhat = dy[i] * g[i];
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * (x[i] - m) * r;
  }
}

// ... and dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)), written over dy.
__device__ __forceinline__ void input_gradient(float (&dy)[8], const float (&x)[8],
                                               const float (&g)[8], float m, float r,
                                               float mean_dxhat, float mean_dxhat_xhat) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float xhat = (x[i] - m) * r;
    dy[i] = r * (dy[i] * g[i] - mean_dxhat - xhat * mean_dxhat_xhat);
  }
}

__device__ __forceinline__ void add_residual(float (&dx)[8], const __nv_bfloat16* residual,
                                             std::int64_t offset) {
  if (residual == nullptr) return;
  float res[8];
  load_bf16x8(residual + offset, res);
#pragma unroll
  for (int i = 0; i < 8; ++i) dx[i] += res[i];
}

// RMSNorm drops the mean(dxhat) term. dinp may alias dout: each lane reads an
// element before it writes it, and the parameter-gradient kernel runs first.
// A non-null `residual` (the gradient the residual branch carries past the
// norm; may alias dinp, read by the lane before it writes) is added to dinp.
template <bool kCentered>
__global__ void __launch_bounds__(kNormThreads)
    norm_backward_input_kernel(__nv_bfloat16* dinp, const __nv_bfloat16* dout,
                               const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                               const float* mean, const float* rstd,
                               const __nv_bfloat16* residual, int rows, int cols) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const std::int64_t offset = row * cols;
  const float m = kCentered ? mean[row] : 0.0f;
  const float r = rstd[row];
  const float inv_cols = 1.0f / static_cast<float>(cols);

  float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
  for (int c = lane * kBf16PerVector; c < cols; c += kColsPerWarpStep) {
    float dy[8], x[8], g[8];
    load_bf16x8(dout + offset + c, dy);
    load_bf16x8(inp + offset + c, x);
    load_bf16x8(gamma + c, g);
    accumulate_dxhat_sums(dy, x, g, m, r, sum_dxhat, sum_dxhat_xhat);
  }
  const float mean_dxhat = kCentered ? warp_sum(sum_dxhat) * inv_cols : 0.0f;
  const float mean_dxhat_xhat = warp_sum(sum_dxhat_xhat) * inv_cols;

  for (int c = lane * kBf16PerVector; c < cols; c += kColsPerWarpStep) {
    float dy[8], x[8], g[8];
    load_bf16x8(dout + offset + c, dy);
    load_bf16x8(inp + offset + c, x);
    load_bf16x8(gamma + c, g);
    input_gradient(dy, x, g, m, r, mean_dxhat, mean_dxhat_xhat);
    add_residual(dy, residual, offset + c);
    store_bf16x8(dinp + offset + c, dy);
  }
}

// Register-resident variants: a lane holds vectors lane, lane + 32, ... of its
// row, kVectors of them (cols <= kVectors * 256); vectors past the row's end
// are skipped by the `c < cols` guards, which unrolling turns into predicates.
inline constexpr int kMaxRegisterVectors = 8;

template <bool kCentered, int kVectors>
__global__ void __launch_bounds__(kNormThreads)
    norm_forward_registers_kernel(__nv_bfloat16* out, float* mean_out, float* rstd_out,
                                  const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                                  const __nv_bfloat16* beta, int rows, int cols, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const __nv_bfloat16* x = inp + row * cols;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  uint4 raw[kVectors];
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const int c = (lane + k * kWarpSize) * kBf16PerVector;
    raw[k] = c < cols ? *reinterpret_cast<const uint4*>(x + c) : make_uint4(0, 0, 0, 0);
  }
  float mean = 0.0f;
  if constexpr (kCentered) {
    float sum = 0.0f;  // padding vectors hold zeros: they add nothing
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      float v[8];
      unpack_bf16x8(raw[k], v);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += v[i];
    }
    mean = warp_sum(sum) * inv_cols;
  }
  float squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    if ((lane + k * kWarpSize) * kBf16PerVector >= cols) continue;
    float v[8];
    unpack_bf16x8(raw[k], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float d = v[i] - mean;
      squares += d * d;
    }
  }
  const float rstd = rsqrtf(warp_sum(squares) * inv_cols + eps);

  __nv_bfloat16* y = out + row * cols;
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const int c = (lane + k * kWarpSize) * kBf16PerVector;
    if (c >= cols) continue;
    float v[8], g[8], b[8] = {};
    unpack_bf16x8(raw[k], v);
    load_bf16x8(gamma + c, g);
    if (kCentered && beta != nullptr) load_bf16x8(beta + c, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (v[i] - mean) * rstd * g[i] + b[i];
    store_bf16x8(y + c, v);
  }
  if (lane == 0) {
    if (kCentered && mean_out != nullptr) mean_out[row] = mean;
    if (rstd_out != nullptr) rstd_out[row] = rstd;
  }
}

// The whole backward in one pass, for rows of up to kVectors x 256 columns:
// one block per chunk of kRowsPerChunk rows, warp w taking rows w, w + kWarps,
// ...; each row held in registers (as norm_forward_registers_kernel does), and on the way
// each warp adds its rows' dout * xhat (-> dgamma), dout (-> dbeta) and, when
// dsum_partials is not null, the written dinp (-> the bias gradient of the
// linear layer whose output is this norm's input) into its own slice of
// shared memory. The slices are then summed in warp order into the chunk's
// partials (column_partials.h), so the result is deterministic. This reads
// dout and inp once instead of twice (the two-kernel path) and replaces the
// bias gradient's separate pass over dinp.
// Shared memory: [array][warp][k * 8 + i][lane] floats, conflict-free for the
// warp's accesses (array 0: dgamma, 1: dbeta if kCentered, then dsum).
template <bool kCentered, int kVectors, int kWarps>
__global__ void __launch_bounds__(kWarps * kWarpSize, 1)
    norm_backward_fused_kernel(__nv_bfloat16* dinp, float* dgamma_partials, float* dbeta_partials,
                               float* dsum_partials, const __nv_bfloat16* dout,
                               const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                               const float* mean, const float* rstd,
                               const __nv_bfloat16* residual, int rows, int cols) {
  extern __shared__ float column_sums[];
  constexpr int kSlots = kVectors * kColsPerWarpStep;  // floats per warp and array
  constexpr int kDbeta = kCentered ? 1 : 0;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const bool with_dsum = dsum_partials != nullptr;
  float* dg = column_sums + warp * kSlots;
  float* db = column_sums + (kDbeta * kWarps + warp) * kSlots;             // used if kCentered
  float* ds = column_sums + ((1 + kDbeta) * kWarps + warp) * kSlots;       // used if with_dsum
  for (int slot = lane; slot < kSlots; slot += kWarpSize) {
    dg[slot] = 0.0f;
    if (kCentered) db[slot] = 0.0f;
    if (with_dsum) ds[slot] = 0.0f;
  }
  const int chunk = blockIdx.x;
  const int row_end = min(rows, (chunk + 1) * kRowsPerChunk);
  const float inv_cols = 1.0f / static_cast<float>(cols);

  for (int row = chunk * kRowsPerChunk + warp; row < row_end; row += kWarps) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    const float m = kCentered ? mean[row] : 0.0f;
    const float r = rstd[row];
    uint4 raw_dy[kVectors], raw_x[kVectors];
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      const int c = (lane + k * kWarpSize) * kBf16PerVector;
      raw_dy[k] = c < cols ? *reinterpret_cast<const uint4*>(dout + offset + c) : make_uint4(0, 0, 0, 0);
      raw_x[k] = c < cols ? *reinterpret_cast<const uint4*>(inp + offset + c) : make_uint4(0, 0, 0, 0);
    }
    float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      const int c = (lane + k * kWarpSize) * kBf16PerVector;
      if (c >= cols) continue;
      float dy[8], x[8], g[8];
      unpack_bf16x8(raw_dy[k], dy);
      unpack_bf16x8(raw_x[k], x);
      load_bf16x8(gamma + c, g);
      accumulate_dxhat_sums(dy, x, g, m, r, sum_dxhat, sum_dxhat_xhat);
    }
    const float mean_dxhat = kCentered ? warp_sum(sum_dxhat) * inv_cols : 0.0f;
    const float mean_dxhat_xhat = warp_sum(sum_dxhat_xhat) * inv_cols;
    // The residual row, all of it before any store: dinp may alias it, so loads
    // left between the stores could not be issued early (the compiler must keep
    // their order), and each would wait its full latency.
    uint4 raw_res[kVectors];
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      const int c = (lane + k * kWarpSize) * kBf16PerVector;
      raw_res[k] = residual != nullptr && c < cols ? *reinterpret_cast<const uint4*>(residual + offset + c)
                                                   : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      const int c = (lane + k * kWarpSize) * kBf16PerVector;
      if (c >= cols) continue;
      float dy[8], x[8], g[8];
      unpack_bf16x8(raw_dy[k], dy);
      unpack_bf16x8(raw_x[k], x);
      load_bf16x8(gamma + c, g);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int slot = (k * kBf16PerVector + i) * kWarpSize + lane;
        dg[slot] += dy[i] * (x[i] - m) * r;
        if (kCentered) db[slot] += dy[i];
      }
      input_gradient(dy, x, g, m, r, mean_dxhat, mean_dxhat_xhat);
      if (residual != nullptr) {
        float res[8];
        unpack_bf16x8(raw_res[k], res);
#pragma unroll
        for (int i = 0; i < 8; ++i) dy[i] += res[i];
      }
      if (with_dsum) {
#pragma unroll
        for (int i = 0; i < 8; ++i) ds[(k * kBf16PerVector + i) * kWarpSize + lane] += dy[i];
      }
      store_bf16x8(dinp + offset + c, dy);
    }
  }
  __syncthreads();
  // Column c of a slot: lane l, vector k, element i hold column (l + 32 k) * 8 + i.
  const std::size_t first = static_cast<std::size_t>(chunk) * cols;
  for (int slot = threadIdx.x; slot < kSlots; slot += kWarps * kWarpSize) {
    const int l = slot % kWarpSize, i = (slot / kWarpSize) % kBf16PerVector,
              k = slot / kColsPerWarpStep;
    const int c = (l + k * kWarpSize) * kBf16PerVector + i;
    if (c >= cols) continue;
    float sum_g = 0.0f, sum_b = 0.0f, sum_s = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      sum_g += column_sums[w * kSlots + slot];
      if (kCentered) sum_b += column_sums[(kDbeta * kWarps + w) * kSlots + slot];
      if (with_dsum) sum_s += column_sums[((1 + kDbeta) * kWarps + w) * kSlots + slot];
    }
    dgamma_partials[first + c] = sum_g;
    if (kCentered) dbeta_partials[first + c] = sum_b;
    if (with_dsum) dsum_partials[first + c] = sum_s;
  }
}

static_assert(kNormBackwardMaxSummedCols == 16 * kColsPerWarpStep,
              "launch_norm_backward_fused's widest variant holds 16 vectors per lane");

template <bool kCentered, int kVectors, int kWarps>
void launch_norm_backward_fused_variant(__nv_bfloat16* dinp, float* dgamma_partials,
                                        float* dbeta_partials, float* dsum_partials,
                                        const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                                        const __nv_bfloat16* gamma, const float* mean,
                                        const float* rstd, const __nv_bfloat16* residual, int rows,
                                        int cols, cudaStream_t stream) {
  const int arrays = 1 + (kCentered ? 1 : 0) + (dsum_partials != nullptr ? 1 : 0);
  const int smem = arrays * kWarps * kVectors * kColsPerWarpStep * static_cast<int>(sizeof(float));
  auto kernel = norm_backward_fused_kernel<kCentered, kVectors, kWarps>;
  SEXTANT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<row_chunks(rows), kWarps * kWarpSize, smem, stream>>>(
      dinp, dgamma_partials, dbeta_partials, dsum_partials, dout, inp, gamma, mean, rstd, residual,
      rows, cols);
}

// The fused backward for rows of up to kNormBackwardMaxSummedCols columns: 8 warps per
// block up to 2048 columns, 4 above (shared memory: at most 3 arrays x 8 warps
// x 2048 floats = 192 KiB, one block per SM). Partials: (chunks, cols) each.
template <bool kCentered>
void launch_norm_backward_fused(__nv_bfloat16* dinp, float* dgamma_partials, float* dbeta_partials,
                                float* dsum_partials, const __nv_bfloat16* dout,
                                const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                                const float* mean, const float* rstd,
                                const __nv_bfloat16* residual, int rows, int cols,
                                cudaStream_t stream) {
  const int vectors = (cols + kColsPerWarpStep - 1) / kColsPerWarpStep;
  if (vectors <= 2)
    launch_norm_backward_fused_variant<kCentered, 2, 8>(dinp, dgamma_partials, dbeta_partials, dsum_partials,
                                                        dout, inp, gamma, mean, rstd, residual, rows, cols, stream);
  else if (vectors <= 4)
    launch_norm_backward_fused_variant<kCentered, 4, 8>(dinp, dgamma_partials, dbeta_partials, dsum_partials,
                                                        dout, inp, gamma, mean, rstd, residual, rows, cols, stream);
  else if (vectors <= 8)
    launch_norm_backward_fused_variant<kCentered, 8, 8>(dinp, dgamma_partials, dbeta_partials, dsum_partials,
                                                        dout, inp, gamma, mean, rstd, residual, rows, cols, stream);
  else
    launch_norm_backward_fused_variant<kCentered, 16, 4>(dinp, dgamma_partials, dbeta_partials, dsum_partials,
                                                         dout, inp, gamma, mean, rstd, residual, rows, cols, stream);
}

// Launches the forward for rows of `cols`: the smallest register variant that
// holds the row, or the looping kernel for wider rows.
template <bool kCentered>
void launch_norm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                         const __nv_bfloat16* gamma, const __nv_bfloat16* beta, int rows,
                         int cols, float eps, cudaStream_t stream) {
  const int blocks = (rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock;
  const int vectors = (cols + kColsPerWarpStep - 1) / kColsPerWarpStep;
  if (vectors <= 2)
    norm_forward_registers_kernel<kCentered, 2><<<blocks, kNormThreads, 0, stream>>>(
        out, mean, rstd, inp, gamma, beta, rows, cols, eps);
  else if (vectors <= 4)
    norm_forward_registers_kernel<kCentered, 4><<<blocks, kNormThreads, 0, stream>>>(
        out, mean, rstd, inp, gamma, beta, rows, cols, eps);
  else if (vectors <= kMaxRegisterVectors)
    norm_forward_registers_kernel<kCentered, kMaxRegisterVectors>
        <<<blocks, kNormThreads, 0, stream>>>(out, mean, rstd, inp, gamma, beta, rows, cols, eps);
  else
    norm_forward_kernel<kCentered><<<blocks, kNormThreads, 0, stream>>>(
        out, mean, rstd, inp, gamma, beta, rows, cols, eps);
}

// The input gradient alone, for rows wider than the fused backward takes
// (kNormBackwardMaxSummedCols): one warp per row, looping over memory.
template <bool kCentered>
void launch_norm_backward_input(__nv_bfloat16* dinp, const __nv_bfloat16* dout,
                                const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                                const float* mean, const float* rstd,
                                const __nv_bfloat16* residual, int rows, int cols,
                                cudaStream_t stream) {
  const int blocks = (rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock;
  norm_backward_input_kernel<kCentered><<<blocks, kNormThreads, 0, stream>>>(
      dinp, dout, inp, gamma, mean, rstd, residual, rows, cols);
}

// Partial column sums of dout * xhat (-> dgamma) and dout (-> dbeta) over one
// chunk of kRowsPerChunk rows. Block (32, 8): x picks 8 columns (16 bytes, so a
// warp reads 512 contiguous bytes of a row), y strides over the chunk's rows.
inline constexpr int kParamGradColsPerBlock = kWarpSize * kBf16PerVector;  // 256
inline constexpr int kParamGradRowsInFlight = 8;

template <bool kCentered>
__global__ void __launch_bounds__(kWarpSize * kParamGradRowsInFlight)
    norm_param_grad_partials_kernel(float* dgamma_partials, float* dbeta_partials,
                                    const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                                    const float* mean, const float* rstd, int rows, int cols) {
  __shared__ float staged[kParamGradRowsInFlight][kParamGradColsPerBlock];
  const int col = blockIdx.x * kParamGradColsPerBlock + threadIdx.x * kBf16PerVector;
  const int chunk = blockIdx.y;
  const int row_end = min(rows, (chunk + 1) * kRowsPerChunk);

  float dg[8] = {}, db[8] = {};
  if (col < cols) {
    for (int row = chunk * kRowsPerChunk + threadIdx.y; row < row_end;
         row += kParamGradRowsInFlight) {
      const std::int64_t offset = static_cast<std::int64_t>(row) * cols + col;
      const float m = kCentered ? mean[row] : 0.0f;
      const float r = rstd[row];
      float dy[8], x[8];
      load_bf16x8(dout + offset, dy);
      load_bf16x8(inp + offset, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        dg[i] += dy[i] * (x[i] - m) * r;
        db[i] += dy[i];
      }
    }
  }

  // Sum the 8 row groups in a fixed order; thread t then owns column t of the tile.
  const int t = threadIdx.y * kWarpSize + threadIdx.x;
  const int out_col = blockIdx.x * kParamGradColsPerBlock + t;
  const std::size_t out_index = static_cast<std::size_t>(chunk) * cols + out_col;
#pragma unroll
  for (int i = 0; i < 8; ++i) staged[threadIdx.y][threadIdx.x * kBf16PerVector + i] = dg[i];
  __syncthreads();
  if (out_col < cols) {
    float sum = 0.0f;
#pragma unroll
    for (int y = 0; y < kParamGradRowsInFlight; ++y) sum += staged[y][t];
    dgamma_partials[out_index] = sum;
  }
  if constexpr (kCentered) {
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 8; ++i) staged[threadIdx.y][threadIdx.x * kBf16PerVector + i] = db[i];
    __syncthreads();
    if (out_col < cols) {
      float sum = 0.0f;
#pragma unroll
      for (int y = 0; y < kParamGradRowsInFlight; ++y) sum += staged[y][t];
      dbeta_partials[out_index] = sum;
    }
  }
}


// The backward both launchers share, after their argument checks: the fused
// pass up to kNormBackwardMaxSummedCols columns, else the parameter-gradient
// kernel (first: dinp may overwrite dout) and the input-gradient kernel.
// workspace: dgamma, dbeta (kCentered only) and dsum partials, (chunks, cols) each.
template <bool kCentered>
void run_norm_backward(__nv_bfloat16* dinp, float* dgamma, float* dbeta, const __nv_bfloat16* dout,
                       const __nv_bfloat16* inp, const __nv_bfloat16* gamma, const float* mean,
                       const float* rstd, int rows, int cols, float* workspace,
                       const NormBackwardOptions& options, cudaStream_t stream) {
  const int chunks = row_chunks(rows);
  const std::size_t array = static_cast<std::size_t>(chunks) * cols;
  float* dgamma_partials = workspace;
  float* dbeta_partials = kCentered ? workspace + array : nullptr;
  float* dsum_partials = workspace + (kCentered ? 2 : 1) * array;
  const bool accumulate = options.accumulate_param_grads;
  const __nv_bfloat16* residual = cuda_bf16(options.residual_grad);
  if (cols <= kNormBackwardMaxSummedCols) {
    launch_norm_backward_fused<kCentered>(dinp, dgamma_partials, dbeta_partials,
                                          options.dinp_column_sums != nullptr ? dsum_partials : nullptr,
                                          dout, inp, gamma, mean, rstd, residual, rows, cols, stream);
    SEXTANT_CHECK_LAUNCH("norm_backward_fused_kernel");
  } else {
    const dim3 grid((cols + kParamGradColsPerBlock - 1) / kParamGradColsPerBlock, chunks);
    const dim3 block(kWarpSize, kParamGradRowsInFlight);
    norm_param_grad_partials_kernel<kCentered><<<grid, block, 0, stream>>>(
        dgamma_partials, dbeta_partials, dout, inp, mean, rstd, rows, cols);
    SEXTANT_CHECK_LAUNCH("norm_param_grad_partials_kernel");
  }
  ColumnSum sums[kMaxColumnSumsPerLaunch];
  int count = 0;
  sums[count++] = {dgamma_partials, dgamma};
  if (kCentered && dbeta != nullptr) sums[count++] = {dbeta_partials, dbeta};
  const bool fused = cols <= kNormBackwardMaxSummedCols;
  if (fused && options.dinp_column_sums != nullptr) sums[count++] = {dsum_partials, options.dinp_column_sums};
  accumulate_column_partials(sums, count, chunks, cols, stream, accumulate);
  if (fused) return;
  launch_norm_backward_input<kCentered>(dinp, dout, inp, gamma, mean, rstd, residual, rows, cols, stream);
  SEXTANT_CHECK_LAUNCH("norm_backward_input_kernel");
}

}  // namespace sextant::kernels::detail
