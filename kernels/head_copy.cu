#include "kernels/head_copy.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
constexpr int kThreads = 256;

// One thread per 8 elements of one head of one token of dst.
__global__ void copy_heads_kernel(__nv_bfloat16* dst, const __nv_bfloat16* src, long long tokens,
                                  int heads, int src_row, int src_head, int dst_row, int dst_head,
                                  int copy_width, int dst_width, float scale) {
  const int vectors = dst_width / kBf16PerVector;
  const long long index = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (index >= tokens * heads * vectors) return;
  const int first = static_cast<int>(index % vectors) * kBf16PerVector;
  const int head = static_cast<int>((index / vectors) % heads);
  const long long token = index / (static_cast<long long>(vectors) * heads);
  uint4* out = reinterpret_cast<uint4*>(dst + token * dst_row + static_cast<long long>(head) * dst_head + first);
  if (first >= copy_width) {
    *out = make_uint4(0, 0, 0, 0);
    return;
  }
  const __nv_bfloat16* in = src + token * src_row + static_cast<long long>(head) * src_head + first;
  if (scale == 1.0f) {
    *out = *reinterpret_cast<const uint4*>(in);
    return;
  }
  float values[kBf16PerVector];
  detail::load_bf16x8(in, values);
#pragma unroll
  for (float& v : values) v *= scale;
  detail::store_bf16x8(reinterpret_cast<__nv_bfloat16*>(out), values);
}

}  // namespace

std::string head_copy_problem(const HeadCopy& c) {
  std::string problems;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) problems += (problems.empty() ? "" : "; ") + what;
  };
  need(c.tokens > 0 && c.heads > 0, "tokens (" + std::to_string(c.tokens) + ") and heads (" +
                                        std::to_string(c.heads) + ") must be positive");
  need(c.copy_width > 0 && c.copy_width <= c.dst_width,
       "copy_width (" + std::to_string(c.copy_width) + ") must be in [1, dst_width (" +
           std::to_string(c.dst_width) + ")]");
  for (int v : {c.src_row, c.src_head, c.dst_row, c.dst_head, c.copy_width, c.dst_width})
    if (v % kBf16PerVector != 0) {
      need(false, "strides and widths must be multiples of 8 (got " + std::to_string(v) + ")");
      break;
    }
  need(c.dst_head >= c.dst_width && c.dst_row >= static_cast<long long>(c.heads) * c.dst_head - (c.dst_head - c.dst_width),
       "dst heads overlap (dst_head " + std::to_string(c.dst_head) + ", dst_row " + std::to_string(c.dst_row) + ")");
  need(c.src_head >= c.copy_width, "src heads overlap (src_head " + std::to_string(c.src_head) + ")");
  return problems;
}

void copy_heads(Bf16* dst, const Bf16* src, const HeadCopy& c, cudaStream_t stream) {
  const std::string problem = head_copy_problem(c);
  require_argument(problem.empty(), "copy_heads", problem);
  require_argument(dst != nullptr && src != nullptr, "copy_heads", "a pointer is null");
  require_argument(is_aligned(dst, 16) && is_aligned(src, 16), "copy_heads",
                   "dst and src must be 16-byte aligned");
  const long long threads = c.tokens * c.heads * (c.dst_width / kBf16PerVector);
  const long long blocks = (threads + kThreads - 1) / kThreads;
  copy_heads_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      detail::cuda_bf16(dst), detail::cuda_bf16(src), c.tokens, c.heads, c.src_row, c.src_head,
      c.dst_row, c.dst_head, c.copy_width, c.dst_width, c.scale);
  SEXTANT_CHECK_LAUNCH("copy_heads_kernel");
}

}  // namespace sextant::kernels
