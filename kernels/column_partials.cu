#include "kernels/column_partials.h"

#include <cuda_runtime.h>

#include "kernels/cuda_check.h"

namespace sextant::kernels::detail {
namespace {

// One thread per column; consecutive threads read consecutive columns of each
// chunk, so every chunk row is one coalesced read.
__global__ void accumulate_column_partials_kernel(const float* partials, int chunks, int cols,
                                                  float* out, bool accumulate) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float sum = 0.0f;
  for (int chunk = 0; chunk < chunks; ++chunk)
    sum += partials[static_cast<std::size_t>(chunk) * cols + c];
  out[c] = accumulate ? out[c] + sum : sum;
}

}  // namespace

void accumulate_column_partials(const float* partials, int chunks, int cols, float* out,
                                cudaStream_t stream, bool accumulate) {
  if (cols == 0) return;
  constexpr int kThreads = 256;
  accumulate_column_partials_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      partials, chunks, cols, out, accumulate);
  SEXTANT_CHECK_LAUNCH("accumulate_column_partials_kernel");
}

}  // namespace sextant::kernels::detail
