#include "kernels/fp32_rows.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda_check.h"

namespace sextant::kernels {
namespace {

__device__ float to_float(float x) { return x; }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ void store(float* p, float v) { *p = v; }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// One thread per element, grid-stride over rows x width.
template <typename Dst, typename Src>
__global__ void rows_kernel(Dst* __restrict__ dst, const Src* __restrict__ src, long long rows, int width,
                            long long dst_stride, long long src_stride, bool accumulate) {
  const long long n = rows * width;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += step) {
    const long long r = i / width, c = i % width;
    Dst* d = dst + r * dst_stride + c;
    const float v = to_float(src[r * src_stride + c]);
    if (accumulate)
      store(d, to_float(*d) + v);
    else
      store(d, v);
  }
}

template <typename Dst, typename Src>
void launch(Dst* dst, const Src* src, const RowBlock& b, bool accumulate, const char* launcher,
            cudaStream_t stream) {
  const std::string problem = row_block_problem(b);
  require_argument(problem.empty(), launcher, problem);
  require_argument(dst != nullptr && src != nullptr, launcher, "a pointer is null");
  const long long n = b.rows * b.width;
  constexpr int kThreads = 256;
  const long long wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  rows_kernel<<<blocks, kThreads, 0, stream>>>(dst, src, b.rows, b.width,
                                               b.dst_row_stride != 0 ? b.dst_row_stride : b.width,
                                               b.src_row_stride != 0 ? b.src_row_stride : b.width, accumulate);
  SEXTANT_CHECK_LAUNCH(launcher);
}

}  // namespace

std::string row_block_problem(const RowBlock& b) {
  std::string why;
  auto add = [&](const std::string& reason) { why += (why.empty() ? "" : "; ") + reason; };
  if (b.rows <= 0) add("rows (" + std::to_string(b.rows) + ") must be positive");
  if (b.width <= 0) add("width (" + std::to_string(b.width) + ") must be positive");
  if (b.dst_row_stride != 0 && b.dst_row_stride < b.width)
    add("dst_row_stride (" + std::to_string(b.dst_row_stride) + ") must be 0 or at least width");
  if (b.src_row_stride != 0 && b.src_row_stride < b.width)
    add("src_row_stride (" + std::to_string(b.src_row_stride) + ") must be 0 or at least width");
  return why;
}

void accumulate_bf16_rows(float* dst, const Bf16* src, const RowBlock& b, bool overwrite, cudaStream_t stream) {
  launch(dst, reinterpret_cast<const __nv_bfloat16*>(src), b, !overwrite, "accumulate_bf16_rows", stream);
}

void store_bf16_rows(Bf16* dst, const float* src, const RowBlock& b, cudaStream_t stream) {
  launch(reinterpret_cast<__nv_bfloat16*>(dst), src, b, false, "store_bf16_rows", stream);
}

}  // namespace sextant::kernels
