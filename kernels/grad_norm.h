// Global gradient norm and the clipping factor (Pascanu et al. 2013), as
// Megatron's clip_grad_norm_fp32 computes them:
//   norm = sqrt(sum of g^2 over every gradient buffer)
//   scale = max_norm / (norm + 1e-6) if that is < 1, else 1.
// Everything stays on the device: adamw_update reads the scale through a
// pointer, so clipping needs no host sync. Deterministic: fixed-order sums, no
// atomics (the grid size depends on the GPU's multiprocessor count, so the
// bits can differ between GPU models, not between runs).
//
// Use: zero *sum_squares (cudaMemsetAsync), call grad_sum_squares_accumulate
// for each gradient buffer, then grad_clip_scale.
#pragma once

#include <cstddef>

#include "kernels/stream.h"

namespace sextant::kernels {

/// Device workspace grad_sum_squares_accumulate needs (per-block partial sums).
std::size_t grad_sum_squares_workspace_bytes();

/// *sum_squares += sum over i < n of grads[i]^2.  grads: (n) fp32, 16-byte aligned;
/// sum_squares: one device float. Calls on one stream are summed in call order.
void grad_sum_squares_accumulate(float* sum_squares, const float* grads, std::size_t n,
                                 void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

/// *norm = sqrt(*sum_squares); *scale = the clipping factor above (1 when
/// max_norm <= 0, i.e. no clipping). A non-finite norm gives a NaN scale, which
/// makes adamw_update skip the step (as Megatron skips it) with no host sync.
/// All device scalars.
void grad_clip_scale(float* norm, float* scale, const float* sum_squares, float max_norm,
                     cudaStream_t stream);

}  // namespace sextant::kernels
