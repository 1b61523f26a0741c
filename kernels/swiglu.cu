#include "kernels/swiglu.h"

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::load_bf16x8;
using detail::store_bf16x8;

__device__ __forceinline__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

// One 16-byte vector of the output per thread; cols % 8 == 0, so the gate and
// up vectors it needs are each one aligned 16-byte load.
__global__ void swiglu_forward_kernel(__nv_bfloat16* out, const __nv_bfloat16* inp,
                                      std::int64_t vectors, int cols) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * kBf16PerVector;
  const std::int64_t row = e / cols;
  const std::int64_t col = e % cols;
  const __nv_bfloat16* gate_ptr = inp + row * 2 * cols + col;
  float gate[8], up[8];
  load_bf16x8(gate_ptr, gate);
  load_bf16x8(gate_ptr + cols, up);
#pragma unroll
  for (int i = 0; i < 8; ++i) gate[i] = gate[i] * sigmoid(gate[i]) * up[i];
  store_bf16x8(out + e, gate);
}

__global__ void swiglu_backward_kernel(__nv_bfloat16* dinp, const __nv_bfloat16* dout,
                                       const __nv_bfloat16* inp, std::int64_t vectors, int cols) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * kBf16PerVector;
  const std::int64_t row = e / cols;
  const std::int64_t col = e % cols;
  const std::int64_t in_offset = row * 2 * cols + col;
  float dy[8], gate[8], up[8], dgate[8], dup[8];
  load_bf16x8(dout + e, dy);
  load_bf16x8(inp + in_offset, gate);
  load_bf16x8(inp + in_offset + cols, up);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float s = sigmoid(gate[i]);
    const float silu = gate[i] * s;
    // d silu / d a = s + a s (1 - s)
    dgate[i] = dy[i] * up[i] * (s + gate[i] * s * (1.0f - s));
    dup[i] = dy[i] * silu;
  }
  store_bf16x8(dinp + in_offset, dgate);
  store_bf16x8(dinp + in_offset + cols, dup);
}

void check_arguments(const char* launcher, int rows, int cols, const void* a, const void* b,
                     const void* c) {
  require_argument(rows >= 0, launcher, "rows (" + std::to_string(rows) + ") must be >= 0");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, launcher,
                   "cols (" + std::to_string(cols) +
                       ") must be a positive multiple of 8 (16-byte vector accesses)");
  require_argument(is_aligned(a, 16) && is_aligned(b, 16) && is_aligned(c, 16), launcher,
                   "pointers must be 16-byte aligned");
}

constexpr int kThreads = 256;

}  // namespace

void swiglu_forward(Bf16* out, const Bf16* inp, int rows, int cols, cudaStream_t stream) {
  check_arguments("swiglu_forward", rows, cols, out, inp, nullptr);
  const std::int64_t vectors = static_cast<std::int64_t>(rows) * cols / kBf16PerVector;
  if (vectors == 0) return;
  swiglu_forward_kernel<<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads, 0,
                          stream>>>(detail::cuda_bf16(out), detail::cuda_bf16(inp), vectors, cols);
  SEXTANT_CHECK_LAUNCH("swiglu_forward_kernel");
}

void swiglu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, int rows, int cols,
                     cudaStream_t stream) {
  check_arguments("swiglu_backward", rows, cols, dinp, dout, inp);
  const std::int64_t vectors = static_cast<std::int64_t>(rows) * cols / kBf16PerVector;
  if (vectors == 0) return;
  swiglu_backward_kernel<<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads,
                           0, stream>>>(detail::cuda_bf16(dinp), detail::cuda_bf16(dout),
                                        detail::cuda_bf16(inp), vectors, cols);
  SEXTANT_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace sextant::kernels
