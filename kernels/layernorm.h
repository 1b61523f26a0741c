// LayerNorm over the last dimension (Ba et al. 2016), as GPT-2/3 and Megatron's
// GPT use it: bf16 activations and parameters, fp32 statistics.
//
// As in llm.c, activations and their gradients are written (=), parameter
// gradients are accumulated (+=) in fp32, so gradient accumulation over
// micro-batches needs no extra buffer: zero dgamma/dbeta once per step.
// Parameter gradients are deterministic (no atomics): the same inputs give the
// same bits on every run of the same GPU model.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// out = (inp - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), per row.
///   out, inp: (rows, cols) bf16; gamma, beta: (cols) bf16, beta may be null;
///   mean, rstd: (rows) fp32, saved for the backward; either may be null.
/// Requires cols % 8 == 0 and 16-byte aligned out, inp, gamma, beta.
/// Throws KernelArgumentError on bad arguments, CudaError on a failed launch.
void layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, const Bf16* gamma,
                       const Bf16* beta, int rows, int cols, float eps, cudaStream_t stream);

/// Device workspace layernorm_backward needs for (rows, cols): three fp32 arrays
/// of partial column sums, ceil(rows / 64) x cols each.
std::size_t layernorm_backward_workspace_bytes(int rows, int cols);

/// What the norms' backward adds to the plain gradients (layernorm.h, rmsnorm.h).
struct NormBackwardOptions {
  /// (rows, cols) bf16 added to dinp: the gradient the residual stream carries
  /// past the norm, so one pass writes the stream's new gradient. May alias dinp.
  const Bf16* residual_grad = nullptr;
  /// true: parameter gradients are added (+=, for gradient accumulation over
  /// micro-batches); false: written over (the first micro-batch of a step).
  bool accumulate_param_grads = true;
  /// (cols) fp32, (+)= as the parameter gradients: the column sums of the dinp
  /// written (residual included), i.e. the bias gradient of the linear layer
  /// whose output the residual stream carries here. Needs cols <=
  /// kNormBackwardMaxSummedCols.
  float* dinp_column_sums = nullptr;
};

/// The widest rows whose backward runs as one fused pass (and can sum dinp).
inline constexpr int kNormBackwardMaxSummedCols = 4096;

/// dinp = d(loss)/d(inp) (+ options.residual_grad)  (rows, cols) bf16, written; may alias dout.
/// dgamma += sum over rows of dout * xhat,  dbeta += sum over rows of dout  (cols) fp32
/// (= when !options.accumulate_param_grads); dbeta may be null (no bias).
/// mean, rstd: as saved by layernorm_forward. workspace: at least
/// layernorm_backward_workspace_bytes(rows, cols), 16-byte aligned.
void layernorm_backward(Bf16* dinp, float* dgamma, float* dbeta, const Bf16* dout, const Bf16* inp,
                        const Bf16* gamma, const float* mean, const float* rstd, int rows, int cols,
                        void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                        const NormBackwardOptions& options = {});

}  // namespace sextant::kernels
