#include "kernels/bias_gradient.h"

#include <string>

#include "kernels/column_partials.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::kRowsPerChunk;
using detail::kWarpSize;

// Block (32, 8) over 256 columns and one chunk of 64 rows: thread (x, y) takes
// the 8 columns of vector x and rows y, y + 8, ..., all eight loads issued
// before any is used; then the 8 row groups are added in order through shared
// memory into the chunk's partials. Chunks are taken from the last to the
// first: the product or kernel that wrote dout finished with its last rows,
// the ones most likely still in L2.
constexpr int kColsPerBlock = kWarpSize * kBf16PerVector;
constexpr int kRowGroups = 8;
constexpr int kLoadsPerThread = kRowsPerChunk / kRowGroups;

__global__ void __launch_bounds__(kWarpSize * kRowGroups)
    bias_gradient_partials_kernel(float* partials, const __nv_bfloat16* dout, int rows, int cols) {
  __shared__ float staged[kRowGroups][kColsPerBlock];
  const int col = blockIdx.x * kColsPerBlock + threadIdx.x * kBf16PerVector;
  const int chunk = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  float sum[8] = {};
  if (col < cols) {
    uint4 raw[kLoadsPerThread];
#pragma unroll
    for (int k = 0; k < kLoadsPerThread; ++k) {
      const int row = chunk * kRowsPerChunk + k * kRowGroups + threadIdx.y;
      raw[k] = row < rows ? *reinterpret_cast<const uint4*>(dout + static_cast<std::int64_t>(row) * cols + col)
                          : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kLoadsPerThread; ++k) {
      float v[8];
      detail::unpack_bf16x8(raw[k], v);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum[i] += v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) staged[threadIdx.y][threadIdx.x * kBf16PerVector + i] = sum[i];
  __syncthreads();
  const int t = threadIdx.y * kWarpSize + threadIdx.x;
  const int out_col = blockIdx.x * kColsPerBlock + t;
  if (out_col >= cols) return;
  float total = 0.0f;
#pragma unroll
  for (int y = 0; y < kRowGroups; ++y) total += staged[y][t];
  partials[static_cast<std::size_t>(chunk) * cols + out_col] = total;
}

}  // namespace

std::size_t bias_gradient_workspace_bytes(int rows, int cols) {
  return detail::column_partials_bytes(rows, cols);
}

void bias_gradient(float* dbias, const Bf16* dout, int rows, int cols, bool accumulate, void* workspace,
                   std::size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* kName = "bias_gradient";
  require_argument(rows >= 0 && rows <= detail::kMaxColumnPartialRows, kName,
                   "rows (" + std::to_string(rows) + ") must be in [0, " +
                       std::to_string(detail::kMaxColumnPartialRows) + "]");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, kName,
                   "cols (" + std::to_string(cols) + ") must be a positive multiple of 8");
  require_argument(dbias != nullptr && is_aligned(dout, 16) && is_aligned(workspace, 16), kName,
                   "dbias must not be null; dout and workspace must be 16-byte aligned");
  const std::size_t needed = bias_gradient_workspace_bytes(rows, cols);
  require_argument(workspace != nullptr && workspace_bytes >= needed, kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(needed) + " bytes bias_gradient_workspace_bytes asks for");
  if (rows == 0) {
    if (!accumulate) SEXTANT_CUDA_CHECK(cudaMemsetAsync(dbias, 0, cols * sizeof(float), stream));
    return;
  }
  const int chunks = detail::row_chunks(rows);
  auto* partials = static_cast<float*>(workspace);
  const dim3 grid((cols + kColsPerBlock - 1) / kColsPerBlock, chunks);
  bias_gradient_partials_kernel<<<grid, dim3(kWarpSize, kRowGroups), 0, stream>>>(
      partials, detail::cuda_bf16(dout), rows, cols);
  SEXTANT_CHECK_LAUNCH("bias_gradient_partials_kernel");
  detail::accumulate_column_partials(partials, chunks, cols, dbias, stream, accumulate);
}

}  // namespace sextant::kernels
