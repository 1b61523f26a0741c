// RMSNorm over the last dimension (Zhang & Sennrich 2019), as Llama uses it:
// out = inp * rstd * gamma, rstd = 1 / sqrt(mean(inp^2) + eps); bf16
// activations and gamma, fp32 rstd. Same conventions as layernorm.h:
// activation gradients written, dgamma accumulated (+=) in fp32, deterministic.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/layernorm.h"  // NormBackwardOptions
#include "kernels/stream.h"

namespace sextant::kernels {

/// out, inp: (rows, cols) bf16; gamma: (cols) bf16; rstd: (rows) fp32, may be null.
/// Requires cols % 8 == 0 and 16-byte aligned out, inp, gamma.
void rmsnorm_forward(Bf16* out, float* rstd, const Bf16* inp, const Bf16* gamma, int rows,
                     int cols, float eps, cudaStream_t stream);

/// Device workspace rmsnorm_backward needs: two ceil(rows / 64) x cols fp32 arrays.
std::size_t rmsnorm_backward_workspace_bytes(int rows, int cols);

/// dinp (rows, cols) bf16, written, may alias dout; dgamma (cols) fp32 +=
/// sum over rows of dout * inp * rstd. options: as for layernorm_backward.
void rmsnorm_backward(Bf16* dinp, float* dgamma, const Bf16* dout, const Bf16* inp,
                      const Bf16* gamma, const float* rstd, int rows, int cols, void* workspace,
                      std::size_t workspace_bytes, cudaStream_t stream,
                      const NormBackwardOptions& options = {});

}  // namespace sextant::kernels
