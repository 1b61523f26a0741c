// Device arithmetic the router's kernels share (kernels/moe_router.cu and
// kernels/moe_load_balancing.cu), so that its forward, backward and balancing
// statistics compute the same scores bit for bit. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

namespace sextant::kernels::detail {

/// Added to the sum of the selected sigmoid scores before dividing by it, as
/// Megatron-Core's topk_softmax_with_capacity does (a token whose scores all
/// underflow gets weights 0, not NaN).
inline constexpr float kSigmoidNormEpsilon = 1e-20f;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace sextant::kernels::detail
