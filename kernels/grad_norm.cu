#include "kernels/grad_norm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

constexpr int kThreads = 256;
// A full multiprocessor (8 blocks of 256 threads = 2048, the sm_80/sm_90
// limit), each thread with a 16-byte load in flight: 132 SMs x 32 KiB = 4 MiB
// in flight, above the ~2 MiB that 3.35 TB/s x ~600 ns of latency needs. The
// fixed upper bound keeps the workspace size independent of the GPU.
constexpr int kBlocksPerSm = 8;
constexpr int kMaxBlocks = 2048;

__global__ void __launch_bounds__(kThreads)
    sum_squares_partials_kernel(float* partials, const float* grads, std::size_t n) {
  __shared__ float scratch[kThreads / detail::kWarpSize];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads * 4;
  float sum = 0.0f;
  for (std::size_t i = (static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x) * 4; i < n;
       i += stride) {
    if (i + 4 <= n) {
      const float4 g = *reinterpret_cast<const float4*>(grads + i);
      sum += g.x * g.x + g.y * g.y + g.z * g.z + g.w * g.w;
    } else {
      for (std::size_t j = i; j < n; ++j) sum += grads[j] * grads[j];
    }
  }
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block adds the partials in double, in a fixed order, onto the total.
__global__ void __launch_bounds__(kThreads)
    sum_partials_kernel(float* sum_squares, const float* partials, int count) {
  __shared__ double scratch[kThreads / detail::kWarpSize];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) sum += partials[i];
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) *sum_squares = static_cast<float>(*sum_squares + sum);
}

__global__ void clip_scale_kernel(float* norm, float* scale, const float* sum_squares,
                                  float max_norm) {
  const float total = sqrtf(*sum_squares);
  *norm = total;
  // Megatron: clip_coeff = max_grad_norm / (total_norm + 1e-6), applied if < 1.
  const float coeff = max_norm / (total + 1e-6f);
  if (!isfinite(total))
    *scale = __int_as_float(0x7fc00000);  // NaN: adamw_update skips the step
  else
    *scale = (max_norm > 0.0f && coeff < 1.0f) ? coeff : 1.0f;
}

int partial_blocks(std::size_t n) {
  int device = 0, sms = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t needed = (n + kThreads * 4 - 1) / (kThreads * 4);
  return static_cast<int>(std::min<std::size_t>({needed, static_cast<std::size_t>(sms) * kBlocksPerSm,
                                                 static_cast<std::size_t>(kMaxBlocks)}));
}

}  // namespace

std::size_t grad_sum_squares_workspace_bytes() { return kMaxBlocks * sizeof(float); }

void grad_sum_squares_accumulate(float* sum_squares, const float* grads, std::size_t n,
                                 void* workspace, std::size_t workspace_bytes,
                                 cudaStream_t stream) {
  constexpr const char* kName = "grad_sum_squares_accumulate";
  require_argument(is_aligned(grads, 16), kName, "grads must be 16-byte aligned");
  require_argument(sum_squares != nullptr && workspace != nullptr, kName,
                   "sum_squares and workspace must not be null");
  require_argument(workspace_bytes >= grad_sum_squares_workspace_bytes(), kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(grad_sum_squares_workspace_bytes()) +
                       " bytes grad_sum_squares_workspace_bytes asks for");
  if (n == 0) return;
  const int blocks = partial_blocks(n);
  auto* partials = static_cast<float*>(workspace);
  sum_squares_partials_kernel<<<blocks, kThreads, 0, stream>>>(partials, grads, n);
  SEXTANT_CHECK_LAUNCH("sum_squares_partials_kernel");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(sum_squares, partials, blocks);
  SEXTANT_CHECK_LAUNCH("sum_partials_kernel");
}

void grad_clip_scale(float* norm, float* scale, const float* sum_squares, float max_norm,
                     cudaStream_t stream) {
  require_argument(norm != nullptr && scale != nullptr && sum_squares != nullptr,
                   "grad_clip_scale", "norm, scale and sum_squares must not be null");
  clip_scale_kernel<<<1, 1, 0, stream>>>(norm, scale, sum_squares, max_norm);
  SEXTANT_CHECK_LAUNCH("clip_scale_kernel");
}

}  // namespace sextant::kernels
