#include "kernels/residual.h"

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

__global__ void residual_add_kernel(__nv_bfloat16* out, const __nv_bfloat16* a,
                                    const __nv_bfloat16* b, std::int64_t vectors) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * detail::kBf16PerVector;
  float x[8], y[8];
  detail::load_bf16x8(a + e, x);
  detail::load_bf16x8(b + e, y);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] += y[i];
  detail::store_bf16x8(out + e, x);
}

__global__ void residual_bias_add_kernel(__nv_bfloat16* out, const __nv_bfloat16* a,
                                         const __nv_bfloat16* b, const __nv_bfloat16* bias,
                                         std::int64_t vectors, int cols) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * detail::kBf16PerVector;
  float x[8], y[8], z[8] = {};
  detail::load_bf16x8(a + e, x);
  detail::load_bf16x8(b + e, y);
  if (bias != nullptr) detail::load_bf16x8(bias + e % cols, z);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] += y[i] + z[i];
  detail::store_bf16x8(out + e, x);
}

}  // namespace

void residual_bias_add(Bf16* out, const Bf16* a, const Bf16* b, const Bf16* bias, int rows, int cols,
                       cudaStream_t stream) {
  constexpr const char* kName = "residual_bias_add";
  require_argument(rows >= 0 && cols > 0 && cols % detail::kBf16PerVector == 0, kName,
                   "cols (" + std::to_string(cols) + ") must be a positive multiple of 8");
  require_argument(is_aligned(out, 16) && is_aligned(a, 16) && is_aligned(b, 16) && is_aligned(bias, 16),
                   kName, "out, a, b and bias must be 16-byte aligned");
  const std::int64_t vectors = static_cast<std::int64_t>(rows) * cols / detail::kBf16PerVector;
  if (vectors == 0) return;
  constexpr int kThreads = 256;
  residual_bias_add_kernel<<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads, 0,
                             stream>>>(detail::cuda_bf16(out), detail::cuda_bf16(a), detail::cuda_bf16(b),
                                       detail::cuda_bf16(bias), vectors, cols);
  SEXTANT_CHECK_LAUNCH("residual_bias_add_kernel");
}

void residual_add(Bf16* out, const Bf16* a, const Bf16* b, std::size_t n, cudaStream_t stream) {
  constexpr const char* kName = "residual_add";
  require_argument(n % detail::kBf16PerVector == 0, kName,
                   "n (" + std::to_string(n) + ") must be a multiple of 8 (16-byte vector accesses)");
  require_argument(is_aligned(out, 16) && is_aligned(a, 16) && is_aligned(b, 16), kName,
                   "out, a and b must be 16-byte aligned");
  const auto vectors = static_cast<std::int64_t>(n / detail::kBf16PerVector);
  if (vectors == 0) return;
  constexpr int kThreads = 256;
  residual_add_kernel<<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads, 0,
                        stream>>>(detail::cuda_bf16(out), detail::cuda_bf16(a),
                                  detail::cuda_bf16(b), vectors);
  SEXTANT_CHECK_LAUNCH("residual_add_kernel");
}

}  // namespace sextant::kernels
