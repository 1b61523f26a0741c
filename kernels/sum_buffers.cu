#include "kernels/sum_buffers.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda_check.h"

namespace sextant::kernels {
namespace {

template <typename T>
struct Summands {
  const T* data[kMaxSummedBuffers];
  int count;
};

// The sum's type: fp32 for floating-point buffers, 64 bits for counts.
__device__ float load_sum(const float* p, std::size_t i) { return p[i]; }
__device__ float load_sum(const __nv_bfloat16* p, std::size_t i) { return __bfloat162float(p[i]); }
__device__ long long load_sum(const std::int32_t* p, std::size_t i) { return p[i]; }
__device__ void store_sum(float* p, std::size_t i, float v) { p[i] = v; }
__device__ void store_sum(__nv_bfloat16* p, std::size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ void store_sum(std::int32_t* p, std::size_t i, long long v) { p[i] = static_cast<std::int32_t>(v); }

// One thread per element (grid-stride); the order of the additions is the
// order of the inputs, the same in every thread.
template <typename T>
__global__ void sum_buffers_kernel(Summands<T> in, T* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    auto sum = load_sum(in.data[0], i);
    for (int k = 1; k < in.count; ++k) sum += load_sum(in.data[k], i);
    store_sum(out, i, sum);
  }
}

template <typename Host, typename Device>
void launch(const Host* const* inputs, int num_inputs, Host* out, std::size_t n,
            cudaStream_t stream) {
  require_argument(num_inputs >= 1 && num_inputs <= kMaxSummedBuffers, "sum_buffers",
                   "num_inputs " + std::to_string(num_inputs) + " is not in [1, " +
                       std::to_string(kMaxSummedBuffers) + "]");
  if (n == 0) return;
  Summands<Device> summands{};
  summands.count = num_inputs;
  for (int k = 0; k < num_inputs; ++k) summands.data[k] = reinterpret_cast<const Device*>(inputs[k]);
  constexpr int kThreads = 256;
  // Enough blocks to fill any current GPU several times over; the loop covers the rest.
  const std::size_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  sum_buffers_kernel<<<blocks, kThreads, 0, stream>>>(summands, reinterpret_cast<Device*>(out), n);
  SEXTANT_CHECK_LAUNCH("sum_buffers_kernel");
}

}  // namespace

void sum_buffers(const Bf16* const* inputs, int num_inputs, Bf16* out, std::size_t n,
                 cudaStream_t stream) {
  launch<Bf16, __nv_bfloat16>(inputs, num_inputs, out, n, stream);
}

void sum_buffers(const float* const* inputs, int num_inputs, float* out, std::size_t n,
                 cudaStream_t stream) {
  launch<float, float>(inputs, num_inputs, out, n, stream);
}

void sum_buffers(const std::int32_t* const* inputs, int num_inputs, std::int32_t* out, std::size_t n,
                 cudaStream_t stream) {
  launch<std::int32_t, std::int32_t>(inputs, num_inputs, out, n, stream);
}

}  // namespace sextant::kernels
