// Element-wise sum of several device buffers into one, in a fixed order:
// out[i] = in[0][i] + in[1][i] + ... + in[n-1][i], accumulated in fp32 from
// in[0] upwards and rounded once. The in-process communicator's reductions use
// it, so a reduction's result depends only on its inputs and their order —
// never on thread timing — and a CPU loop in the same order reproduces it bit
// for bit. int32 buffers (counts) are summed exactly, in 64 bits, and the sum
// is kept in int32 (the caller's counts must fit, as they do in their own buffer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// The most buffers one call sums (they travel in the kernel's parameters).
inline constexpr int kMaxSummedBuffers = 64;

/// out (n) = sum over inputs[0..num_inputs) (each n). `out` may be one of the inputs.
void sum_buffers(const Bf16* const* inputs, int num_inputs, Bf16* out, std::size_t n,
                 cudaStream_t stream);
void sum_buffers(const float* const* inputs, int num_inputs, float* out, std::size_t n,
                 cudaStream_t stream);
void sum_buffers(const std::int32_t* const* inputs, int num_inputs, std::int32_t* out, std::size_t n,
                 cudaStream_t stream);

}  // namespace sextant::kernels
