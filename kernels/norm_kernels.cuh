// The kernels behind layernorm.cu and rmsnorm.cu. RMSNorm is LayerNorm without
// the centering and the bias (Zhang & Sennrich 2019), so one template serves
// both: kCentered = true is LayerNorm.
//
// Layout: rows of `cols` bf16 values, row-major, cols % 8 == 0 and 16-byte
// aligned rows (checked by the launchers). Statistics are fp32.
//
// The forward runs one warp per row and holds rows of up to 2048 columns
// (kMaxRegisterVectors x 256) in registers, all of a lane's 16-byte loads
// issued back to back, and every pass works from there. The backward for rows
// of up to kNormBackwardMaxSummedCols is one fused pass that also sums the
// parameter gradients, a block per chunk of rows with each thread owning
// columns. Wider rows loop over memory, one warp per row, re-reading the row
// (from L1 when it stays there), with the parameter gradients in a kernel of
// their own. Column sums go through column_partials.h to stay deterministic.
#pragma once

#include <algorithm>
#include <string>

#include "kernels/column_partials.h"
#include "kernels/cuda_check.h"
#include "kernels/cp_async.cuh"
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

// The whole backward in one pass, for rows of up to kNormBackwardMaxSummedCols
// columns. One block per chunk of kRowsPerChunk rows, and thread x of it owns
// columns 8x .. 8x + 7 of every row of the chunk: its column sums of dout * xhat
// (-> dgamma), dout (-> dbeta) and, when dsum_partials is not null, of the
// written dinp (-> the bias gradient of the linear layer whose output is this
// norm's input) stay in its registers, added row by row in row order, and go
// straight into the chunk's partials (column_partials.h): no atomics, the same
// bits on every run. This reads dout and inp once instead of twice (the
// two-kernel path) and replaces the bias gradient's separate pass over dinp.
//
// The row sums of dxhat and dxhat * xhat that the input gradient needs
// (input_gradient: LayerNorm of Ba et al. 2016 differentiated through its row
// statistics, as llm.c's layernorm_backward computes it) span the row's
// threads: a warp sum each, then every thread adds the warps' sums in warp
// order from shared memory, after a barrier. Rows come
// kNormBackwardRowsPerGroup at a time, so one barrier serves a group.
//
// Loads arrive by cp.async into a ring of kNormBackwardStages groups in shared
// memory, each thread copying and reading back only its own 16-byte vectors (so
// no barrier guards the ring): while a group is summed, reduced and written,
// the next one is on its way and the one after is issued as soon as its slot is
// read. Memory then stays busy across the barriers and the arithmetic.
// Measured on an H100 SXM, LayerNorm at 8192 x 2048 with residual and column
// sums (134 MB moved; 45 us at the 3.0 TB/s of a device-to-device copy): this
// kernel 54 us; register-only versions (a group's loads, then their use) 55-64
// us; rings of 3-4 groups of 2 rows or 8 of 1 row 1-4 us slower than this one
// of 2 x 2. The whole call (kernel_bandwidth_bench, "(fused)" rows, with
// accumulate_column_partials) went from 72-74 us with the one-warp-per-row
// kernel this replaced, 192 KiB of per-warp column sums in shared memory and
// one block per SM, to 59-60 us.
//
// Narrow rows leave threads over: the block then holds several teams
// (threadIdx.y) of cols / 8 threads rounded up to whole warps, as many as fit in
// kNormBackwardThreads. Team t takes row groups t, t + teams, ... of the chunk,
// waits on a barrier of its own, and the teams' column sums are added in team
// order at the end.
inline constexpr int kNormBackwardThreads = 512;
inline constexpr int kNormBackwardRowsPerGroup = 2;
inline constexpr int kNormBackwardStages = 2;
inline constexpr int kNormBackwardArrays = 3;  // dout, inp, residual
// Team barriers take ids 1..8 of the 16 a block has (PTX ISA, "bar.sync"); 0 is __syncthreads'.
inline constexpr int kNormBackwardMaxTeams = 8;

static_assert(kNormBackwardMaxSummedCols <= kNormBackwardThreads * kBf16PerVector,
              "norm_backward_fused_kernel gives each thread one 8-column vector of a row");
static_assert(kNormBackwardStages * kNormBackwardRowsPerGroup * kNormBackwardArrays >= 2,
              "the ring holds the teams' column sums (two float4 a thread) at the end");

// Waits for the `threads` threads (a multiple of 32) that use barrier `id`.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Adds the teams' sums of one array in team order and writes the total into
// the chunk's row of `partials`. Every thread of the block calls it.
__device__ __forceinline__ void store_team_sums(float (&sum)[8], float4 (*staged)[2],
                                                float* partials, int c, int cols) {
  const int slot = threadIdx.y * blockDim.x + threadIdx.x;
  __syncthreads();  // staged may still be read for the previous array
  if (threadIdx.y > 0) {
    staged[slot][0] = make_float4(sum[0], sum[1], sum[2], sum[3]);
    staged[slot][1] = make_float4(sum[4], sum[5], sum[6], sum[7]);
  }
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int team = 1; team < static_cast<int>(blockDim.y); ++team) {
      const float4 lo = staged[team * blockDim.x + threadIdx.x][0];
      const float4 hi = staged[team * blockDim.x + threadIdx.x][1];
      sum[0] += lo.x, sum[1] += lo.y, sum[2] += lo.z, sum[3] += lo.w;
      sum[4] += hi.x, sum[5] += hi.y, sum[6] += hi.z, sum[7] += hi.w;
    }
    auto* out =
        reinterpret_cast<float4*>(partials + static_cast<std::size_t>(blockIdx.x) * cols + c);
    out[0] = make_float4(sum[0], sum[1], sum[2], sum[3]);
    out[1] = make_float4(sum[4], sum[5], sum[6], sum[7]);
  }
}

// Block (cols / 8 rounded up to warps, teams); dynamic shared memory: the ring,
// as launch_norm_backward_fused sizes it. RMSNorm drops the mean(dxhat) term
// and mean may be null. dinp may alias dout and residual: each element is read
// (by cp.async, waited for) and then written by one thread only.
template <bool kCentered>
__global__ void __launch_bounds__(kNormBackwardThreads, 1)
    norm_backward_fused_kernel(__nv_bfloat16* dinp, float* dgamma_partials, float* dbeta_partials,
                               float* dsum_partials, const __nv_bfloat16* dout,
                               const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                               const float* mean, const float* rstd,
                               const __nv_bfloat16* residual, int rows, int cols) {
  constexpr int kRows = kNormBackwardRowsPerGroup, kStages = kNormBackwardStages;
  // [stage][row of the group][array][thread of the block]: a warp's 16-byte
  // accesses to one (stage, row, array) are 512 contiguous bytes, conflict-free.
  extern __shared__ uint4 ring[];
  // (sum of dxhat, sum of dxhat * xhat) per row of a group and warp of the block;
  // two buffers, for alternate groups, so one barrier per group keeps them apart.
  __shared__ float2 warp_sums[2][kRows][kNormBackwardThreads / kWarpSize];
  __shared__ float chunk_mean[kRowsPerChunk], chunk_rstd[kRowsPerChunk];
  const int threads = static_cast<int>(blockDim.x * blockDim.y);
  const int slot = threadIdx.y * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % kWarpSize;
  const int team_warps = blockDim.x / kWarpSize;
  const int team_first_warp = threadIdx.y * team_warps;
  const int warp = team_first_warp + threadIdx.x / kWarpSize;
  const int c = threadIdx.x * kBf16PerVector;
  const bool owner = c < cols;
  const bool with_dsum = dsum_partials != nullptr;
  const bool with_residual = residual != nullptr;
  const int chunk_first = static_cast<int>(blockIdx.x) * kRowsPerChunk;
  const int row_end = min(rows, chunk_first + kRowsPerChunk);
  const int team_first = chunk_first + threadIdx.y * kRows;  // the team's first group
  const int stride = static_cast<int>(blockDim.y) * kRows;   // between a team's groups
  const float inv_cols = 1.0f / static_cast<float>(cols);
  auto at = [&](int stage, int j, int array) {
    return ring + ((stage * kRows + j) * kNormBackwardArrays + array) * threads + slot;
  };
  // Issues the copies of the team's group q into stage q % kStages; rows past
  // the chunk copy nothing, and the group is committed even when empty, as the
  // waits count groups.
  auto issue = [&](int q) {
    const int first = team_first + q * stride;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int row = first + j;
      if (!owner || row >= row_end) continue;
      const std::int64_t offset = static_cast<std::int64_t>(row) * cols + c;
      cp_async_16(at(q % kStages, j, 0), dout + offset, true);
      cp_async_16(at(q % kStages, j, 1), inp + offset, true);
      if (with_residual) cp_async_16(at(q % kStages, j, 2), residual + offset, true);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int q = 0; q < kStages; ++q) issue(q);
  for (int i = slot; i < row_end - chunk_first; i += threads) {
    if (kCentered) chunk_mean[i] = mean[chunk_first + i];
    chunk_rstd[i] = rstd[chunk_first + i];
  }
  float g[8] = {};
  if (owner) load_bf16x8(gamma + c, g);
  float dg[8] = {}, db[8] = {}, ds[8] = {};
  __syncthreads();  // chunk_mean, chunk_rstd

  for (int q = 0, first = team_first; first < row_end; ++q, first += stride) {
    const int stage = q % kStages, buffer = q % 2;
    cp_async_wait<kStages - 1>();  // group q has landed
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      if (first + j >= row_end) break;
      float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
      if (owner) {
        float dy[8], x[8];
        unpack_bf16x8(*at(stage, j, 0), dy);
        unpack_bf16x8(*at(stage, j, 1), x);
        accumulate_dxhat_sums(dy, x, g, kCentered ? chunk_mean[first + j - chunk_first] : 0.0f,
                              chunk_rstd[first + j - chunk_first], sum_dxhat, sum_dxhat_xhat);
      }
      if (kCentered) sum_dxhat = warp_sum(sum_dxhat);
      sum_dxhat_xhat = warp_sum(sum_dxhat_xhat);
      if (lane == 0) warp_sums[buffer][j][warp] = make_float2(sum_dxhat, sum_dxhat_xhat);
    }
    named_barrier(1 + threadIdx.y, blockDim.x);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int row = first + j;
      if (row >= row_end) break;
      float2 sums = warp_sums[buffer][j][team_first_warp];
      for (int w = 1; w < team_warps; ++w) {
        const float2 s = warp_sums[buffer][j][team_first_warp + w];
        sums.x += s.x, sums.y += s.y;
      }
      if (!owner) continue;
      const float m = kCentered ? chunk_mean[row - chunk_first] : 0.0f;
      const float r = chunk_rstd[row - chunk_first];
      float dy[8], x[8];
      unpack_bf16x8(*at(stage, j, 0), dy);
      unpack_bf16x8(*at(stage, j, 1), x);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        dg[i] += dy[i] * (x[i] - m) * r;
        if (kCentered) db[i] += dy[i];
      }
      input_gradient(dy, x, g, m, r, kCentered ? sums.x * inv_cols : 0.0f, sums.y * inv_cols);
      if (with_residual) {
        float res[8];
        unpack_bf16x8(*at(stage, j, 2), res);
#pragma unroll
        for (int i = 0; i < 8; ++i) dy[i] += res[i];
      }
      if (with_dsum) {
#pragma unroll
        for (int i = 0; i < 8; ++i) ds[i] += dy[i];
      }
      store_bf16x8(dinp + static_cast<std::int64_t>(row) * cols + c, dy);
    }
    issue(q + kStages);  // into the stage just read, which only this thread uses
  }
  cp_async_wait<0>();

  auto* staged = reinterpret_cast<float4(*)[2]>(ring);
  store_team_sums(dg, staged, dgamma_partials, c, cols);
  if (kCentered) store_team_sums(db, staged, dbeta_partials, c, cols);
  if (with_dsum) store_team_sums(ds, staged, dsum_partials, c, cols);
}

// The fused backward for rows of up to kNormBackwardMaxSummedCols columns
// (shared memory: at most 2 x 2 x 3 x 512 x 16 bytes = 96 KiB of ring).
// Partials: (chunks, cols) each.
template <bool kCentered>
void launch_norm_backward_fused(__nv_bfloat16* dinp, float* dgamma_partials, float* dbeta_partials,
                                float* dsum_partials, const __nv_bfloat16* dout,
                                const __nv_bfloat16* inp, const __nv_bfloat16* gamma,
                                const float* mean, const float* rstd,
                                const __nv_bfloat16* residual, int rows, int cols,
                                cudaStream_t stream) {
  const int vectors = cols / kBf16PerVector;
  const int team_threads = (vectors + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int teams = std::min(kNormBackwardMaxTeams, kNormBackwardThreads / team_threads);
  const int ring_bytes = kNormBackwardStages * kNormBackwardRowsPerGroup * kNormBackwardArrays *
                         team_threads * teams * static_cast<int>(sizeof(uint4));
  auto kernel = norm_backward_fused_kernel<kCentered>;
  SEXTANT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_bytes));
  kernel<<<row_chunks(rows), dim3(team_threads, teams), ring_bytes, stream>>>(
      dinp, dgamma_partials, dbeta_partials, dsum_partials, dout, inp, gamma, mean, rstd, residual,
      rows, cols);
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
