#include "kernels/adamw.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

struct UpdateConstants {
  float decay;          // 1 - lr * wd
  float step_size;      // lr / (1 - beta1^t)
  float inv_sqrt_bias2; // 1 / sqrt(1 - beta2^t)
  float beta1, beta2, eps;
};

__device__ __forceinline__ float adamw_element(float& p, float& m, float& v, float g,
                                               const UpdateConstants& k) {
  m = k.beta1 * m + (1.0f - k.beta1) * g;
  v = k.beta2 * v + (1.0f - k.beta2) * g * g;
  p = p * k.decay - k.step_size * m / (sqrtf(v) * k.inv_sqrt_bias2 + k.eps);
  return p;
}

// Four fp32 values (16 bytes) per thread and pass, grid-stride (a grid smaller
// than n / 4 threads loops); the tail of n % 4 is done element-wise.
__global__ void adamw_kernel(float* master, __nv_bfloat16* weights, float* m_state,
                             float* v_state, const float* grads, std::size_t n,
                             UpdateConstants k, const float* grad_scale) {
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  if (!isfinite(scale)) return;  // a skipped step (grad_norm.h)
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x * 4;
  for (std::size_t first = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
       first < n; first += stride) {
  if (first + 4 <= n) {
    float4 p = *reinterpret_cast<const float4*>(master + first);
    float4 m = *reinterpret_cast<const float4*>(m_state + first);
    float4 v = *reinterpret_cast<const float4*>(v_state + first);
    const float4 g = *reinterpret_cast<const float4*>(grads + first);
    adamw_element(p.x, m.x, v.x, g.x * scale, k);
    adamw_element(p.y, m.y, v.y, g.y * scale, k);
    adamw_element(p.z, m.z, v.z, g.z * scale, k);
    adamw_element(p.w, m.w, v.w, g.w * scale, k);
    *reinterpret_cast<float4*>(master + first) = p;
    *reinterpret_cast<float4*>(m_state + first) = m;
    *reinterpret_cast<float4*>(v_state + first) = v;
    if (weights != nullptr) {
      __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(p.x, p.y), __floats2bfloat162_rn(p.z, p.w)};
      *reinterpret_cast<uint2*>(weights + first) = *reinterpret_cast<const uint2*>(pair);
    }
    continue;
  }
  for (std::size_t i = first; i < n; ++i) {
    const float p = adamw_element(master[i], m_state[i], v_state[i], grads[i] * scale, k);
    if (weights != nullptr) weights[i] = __float2bfloat16_rn(p);
  }
  }
}

}  // namespace

void adamw_update(float* master, Bf16* weights, float* m, float* v, const float* grads,
                  std::size_t n, const AdamWStep& step, const float* grad_scale,
                  cudaStream_t stream, int max_blocks) {
  constexpr const char* kName = "adamw_update";
  require_argument(max_blocks >= 0, kName, "max_blocks (" + std::to_string(max_blocks) + ") must be >= 0");
  require_argument(step.step >= 1, kName, "step (" + std::to_string(step.step) + ") must be >= 1");
  require_argument(step.beta1 >= 0.0f && step.beta1 < 1.0f && step.beta2 >= 0.0f &&
                       step.beta2 < 1.0f,
                   kName, "beta1 and beta2 must be in [0, 1)");
  require_argument(is_aligned(master, 16) && is_aligned(m, 16) && is_aligned(v, 16) &&
                       is_aligned(grads, 16) && is_aligned(weights, 16),
                   kName, "master, m, v, grads and weights must be 16-byte aligned");
  if (n == 0) return;
  // Bias corrections once per launch, in double on the host, then rounded to fp32.
  const double bias1 = 1.0 - std::pow(static_cast<double>(step.beta1), step.step);
  const double bias2 = 1.0 - std::pow(static_cast<double>(step.beta2), step.step);
  const UpdateConstants k{
      static_cast<float>(1.0 - static_cast<double>(step.learning_rate) * step.weight_decay),
      static_cast<float>(step.learning_rate / bias1),
      static_cast<float>(1.0 / std::sqrt(bias2)),
      step.beta1,
      step.beta2,
      step.eps};
  // A capped grid takes whole multiprocessors: the block scheduler spreads a
  // grid's first blocks one per SM, so max_blocks blocks of 1024 threads (half an
  // H100 SM's 2048) sit on max_blocks SMs.
  const int block_threads = max_blocks > 0 ? 1024 : 256;
  const std::size_t threads = (n + 3) / 4;
  std::size_t blocks = (threads + block_threads - 1) / block_threads;
  if (max_blocks > 0) blocks = std::min(blocks, static_cast<std::size_t>(max_blocks));
  adamw_kernel<<<static_cast<unsigned>(blocks), block_threads, 0, stream>>>(master, reinterpret_cast<__nv_bfloat16*>(weights), m, v, grads, n, k,
                           grad_scale);
  SEXTANT_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace sextant::kernels
