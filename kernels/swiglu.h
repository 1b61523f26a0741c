// SwiGLU (Shazeer 2020) as Megatron-LM computes it for Llama-style MLPs: the
// first linear layer writes both halves side by side, (rows, 2 * cols) =
// [gate | up], and
//   out = silu(gate) * up,  silu(a) = a * sigmoid(a).
// Arithmetic in fp32; bf16 in and out. No parameters, so no accumulation.
#pragma once

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// out: (rows, cols) bf16; inp: (rows, 2 * cols) bf16 = [gate | up] per row.
/// Requires cols % 8 == 0 and 16-byte aligned pointers.
void swiglu_forward(Bf16* out, const Bf16* inp, int rows, int cols, cudaStream_t stream);

/// dinp: (rows, 2 * cols) bf16, written: [dout * up * silu'(gate) | dout * silu(gate)].
/// dout: (rows, cols) bf16. dinp must not overlap dout or inp.
void swiglu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, int rows, int cols,
                     cudaStream_t stream);

}  // namespace sextant::kernels
