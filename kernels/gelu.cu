#include "kernels/gelu.h"

#include <string>

#include "kernels/column_partials.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::kWarpSize;

// Megatron-LM's fused_bias_gelu constants: sqrt(2/pi) and the cubic coefficient.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float gelu(float u) {
  return 0.5f * u * (1.0f + tanhf(kSqrt2OverPi * (u + kCubic * u * u * u)));
}

__device__ __forceinline__ float gelu_derivative(float u) {
  const float t = tanhf(kSqrt2OverPi * (u + kCubic * u * u * u));
  return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * u * u);
}

// One 16-byte vector per thread; cols % 8 == 0, so a vector never spans two rows.
__global__ void gelu_forward_kernel(__nv_bfloat16* out, const __nv_bfloat16* inp,
                                    const __nv_bfloat16* bias, std::int64_t vectors, int cols) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * kBf16PerVector;
  float x[8], b[8] = {};
  detail::load_bf16x8(inp + e, x);
  if (bias != nullptr) detail::load_bf16x8(bias + e % cols, b);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = gelu(x[i] + b[i]);
  detail::store_bf16x8(out + e, x);
}

// Block (32, 8) over a tile of 256 columns and one chunk of kRowsPerChunk rows:
// writes dinp and, when asked, the chunk's partial column sums of dinp.
constexpr int kColsPerBlock = kWarpSize * kBf16PerVector;
constexpr int kRowsInFlight = 8;

__global__ void __launch_bounds__(kWarpSize * kRowsInFlight)
    gelu_backward_kernel(__nv_bfloat16* dinp, float* dbias_partials, const __nv_bfloat16* dout,
                         const __nv_bfloat16* inp, const __nv_bfloat16* bias, int rows, int cols) {
  __shared__ float staged[kRowsInFlight][kColsPerBlock];
  const int col = blockIdx.x * kColsPerBlock + threadIdx.x * kBf16PerVector;
  const int chunk = blockIdx.y;
  const int row_end = min(rows, (chunk + 1) * detail::kRowsPerChunk);

  float db[8] = {};
  if (col < cols) {
    float b[8] = {};
    if (bias != nullptr) detail::load_bf16x8(bias + col, b);
    for (int row = chunk * detail::kRowsPerChunk + threadIdx.y; row < row_end;
         row += kRowsInFlight) {
      const std::int64_t offset = static_cast<std::int64_t>(row) * cols + col;
      float dy[8], x[8];
      detail::load_bf16x8(dout + offset, dy);
      detail::load_bf16x8(inp + offset, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        dy[i] *= gelu_derivative(x[i] + b[i]);
        db[i] += dy[i];
      }
      detail::store_bf16x8(dinp + offset, dy);
    }
  }
  if (dbias_partials == nullptr) return;  // uniform across the block

  const int t = threadIdx.y * kWarpSize + threadIdx.x;
  const int out_col = blockIdx.x * kColsPerBlock + t;
#pragma unroll
  for (int i = 0; i < 8; ++i) staged[threadIdx.y][threadIdx.x * kBf16PerVector + i] = db[i];
  __syncthreads();
  if (out_col < cols) {
    float sum = 0.0f;
#pragma unroll
    for (int y = 0; y < kRowsInFlight; ++y) sum += staged[y][t];
    dbias_partials[static_cast<std::size_t>(chunk) * cols + out_col] = sum;
  }
}

void check_shape(const char* launcher, int rows, int cols) {
  require_argument(rows >= 0 && rows <= detail::kMaxColumnPartialRows, launcher,
                   "rows (" + std::to_string(rows) + ") must be in [0, " +
                       std::to_string(detail::kMaxColumnPartialRows) + "]");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, launcher,
                   "cols (" + std::to_string(cols) +
                       ") must be a positive multiple of 8 (16-byte vector accesses)");
}

}  // namespace

void gelu_forward(Bf16* out, const Bf16* inp, const Bf16* bias, int rows, int cols,
                  cudaStream_t stream) {
  constexpr const char* kName = "gelu_forward";
  check_shape(kName, rows, cols);
  require_argument(is_aligned(out, 16) && is_aligned(inp, 16) && is_aligned(bias, 16), kName,
                   "out, inp and bias must be 16-byte aligned");
  const std::int64_t vectors = static_cast<std::int64_t>(rows) * cols / kBf16PerVector;
  if (vectors == 0) return;
  constexpr int kThreads = 256;
  gelu_forward_kernel<<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads, 0,
                        stream>>>(detail::cuda_bf16(out), detail::cuda_bf16(inp),
                                  detail::cuda_bf16(bias), vectors, cols);
  SEXTANT_CHECK_LAUNCH("gelu_forward_kernel");
}

std::size_t gelu_backward_workspace_bytes(int rows, int cols) {
  return detail::column_partials_bytes(rows, cols);
}

void gelu_backward(Bf16* dinp, float* dbias, const Bf16* dout, const Bf16* inp, const Bf16* bias,
                   int rows, int cols, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream) {
  constexpr const char* kName = "gelu_backward";
  check_shape(kName, rows, cols);
  require_argument(is_aligned(dinp, 16) && is_aligned(dout, 16) && is_aligned(inp, 16) &&
                       is_aligned(bias, 16) && is_aligned(workspace, 16),
                   kName, "dinp, dout, inp, bias and workspace must be 16-byte aligned");
  if (dbias != nullptr) {
    const std::size_t needed = gelu_backward_workspace_bytes(rows, cols);
    require_argument(workspace != nullptr && workspace_bytes >= needed, kName,
                     "workspace (" + std::to_string(workspace_bytes) +
                         " bytes) is smaller than the " + std::to_string(needed) +
                         " bytes gelu_backward_workspace_bytes asks for");
  }
  if (rows == 0) return;
  const int chunks = detail::row_chunks(rows);
  float* partials = dbias != nullptr ? static_cast<float*>(workspace) : nullptr;
  const dim3 grid((cols + kColsPerBlock - 1) / kColsPerBlock, chunks);
  const dim3 block(kWarpSize, kRowsInFlight);
  gelu_backward_kernel<<<grid, block, 0, stream>>>(detail::cuda_bf16(dinp), partials,
                                                   detail::cuda_bf16(dout), detail::cuda_bf16(inp),
                                                   detail::cuda_bf16(bias), rows, cols);
  SEXTANT_CHECK_LAUNCH("gelu_backward_kernel");
  if (dbias != nullptr) detail::accumulate_column_partials(partials, chunks, cols, dbias, stream);
}

}  // namespace sextant::kernels
