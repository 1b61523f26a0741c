#include "kernels/column_partials.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"  // kWarpSize

namespace sextant::kernels::detail {
namespace {

struct ColumnSums {
  ColumnSum sum[kMaxColumnSumsPerLaunch];
};

constexpr int kChunkGroups = 8;  // threadIdx.y: chunk y, y + 8, ... then summed in y order

// Block (32, 8) per 32 columns of one array (blockIdx.y): consecutive threads
// read consecutive columns of a chunk (coalesced), the 8 rows of threads split
// the chunks, and their sums are added in a fixed order: deterministic.
__global__ void accumulate_column_partials_kernel(ColumnSums sums, int chunks, int cols,
                                                  bool accumulate) {
  __shared__ float staged[kChunkGroups][kWarpSize];
  const ColumnSum s = sums.sum[blockIdx.y];
  const int c = blockIdx.x * kWarpSize + threadIdx.x;
  float sum = 0.0f;
  if (c < cols)
    for (int chunk = threadIdx.y; chunk < chunks; chunk += kChunkGroups)
      sum += s.partials[static_cast<std::size_t>(chunk) * cols + c];
  staged[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total = 0.0f;
#pragma unroll
  for (int y = 0; y < kChunkGroups; ++y) total += staged[y][threadIdx.x];
  s.out[c] = accumulate ? s.out[c] + total : total;
}

}  // namespace

void accumulate_column_partials(const float* partials, int chunks, int cols, float* out,
                                cudaStream_t stream, bool accumulate) {
  const ColumnSum one{partials, out};
  accumulate_column_partials(&one, 1, chunks, cols, stream, accumulate);
}

void accumulate_column_partials(const ColumnSum* sums, int count, int chunks, int cols,
                                cudaStream_t stream, bool accumulate) {
  if (cols == 0 || count == 0) return;
  require_argument(count <= kMaxColumnSumsPerLaunch, "accumulate_column_partials",
                   "at most " + std::to_string(kMaxColumnSumsPerLaunch) + " arrays per launch");
  ColumnSums packed{};
  for (int i = 0; i < count; ++i) packed.sum[i] = sums[i];
  const dim3 grid((cols + kWarpSize - 1) / kWarpSize, count);
  accumulate_column_partials_kernel<<<grid, dim3(kWarpSize, kChunkGroups), 0, stream>>>(
      packed, chunks, cols, accumulate);
  SEXTANT_CHECK_LAUNCH("accumulate_column_partials_kernel");
}

}  // namespace sextant::kernels::detail
