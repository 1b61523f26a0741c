// GELU with the tanh approximation (Hendrycks & Gimpel 2016), fused with the
// bias add of the linear layer before it, as Megatron's bias_gelu does:
//   gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))),  u = inp + bias.
// The backward recomputes u from the saved pre-bias input, so the forward keeps
// only one (rows, cols) tensor alive. Arithmetic in fp32; bf16 in and out.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// out = gelu(inp + bias)   out, inp: (rows, cols) bf16; bias: (cols) bf16, may be null.
/// out may alias inp. Requires cols % 8 == 0 and 16-byte aligned pointers.
void gelu_forward(Bf16* out, const Bf16* inp, const Bf16* bias, int rows, int cols,
                  cudaStream_t stream);

/// Device workspace gelu_backward needs when it computes dbias: ceil(rows / 64) x cols fp32.
std::size_t gelu_backward_workspace_bytes(int rows, int cols);

/// dinp = dout * gelu'(inp + bias)   (rows, cols) bf16, written; may alias dout.
/// dbias += column sums of dinp (fp32, summed before rounding to bf16); when dbias
/// is null nothing is summed and the workspace may be null.
/// Deterministic: no atomics.
void gelu_backward(Bf16* dinp, float* dbias, const Bf16* dout, const Bf16* inp, const Bf16* bias,
                   int rows, int cols, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream);

}  // namespace sextant::kernels
