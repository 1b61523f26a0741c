// The model's norms: each block's pre-norm and the final norm, LayerNorm (Ba
// et al. 2016; GPT) or RMSNorm (Zhang and Sennrich 2019; Llama) over the
// hidden dimension of the residual stream's rows — T/tp of them per rank under
// sequence parallelism. Replicated parameters: under sequence parallelism each
// rank's gradients are partial sums, which the trainer sums over tp
// (ParameterLayout: partial_gradient_over_tp).
//
// The backward fuses two adds of the residual stream (kernels/layernorm.h):
// the stream's gradient past the norm, and, when the shape allows it
// (TransformerShape::residual_biases_from_norms), the bias gradient of the
// projection whose output the stream carries — its column sum.
#pragma once

#include <cstddef>

#include "engine/transformer/arena_buffers.h"
#include "engine/transformer/model_context.h"

namespace sextant::engine::transformer {

/// What a norm's forward leaves for its backward. Under sequence parallelism
/// all three are on this rank's tokens (a block's output then travels
/// all-gathered: tensor_parallel/sequence_parallel.h).
struct NormActivations {
  Bf16* out = nullptr;     // (rows, h)
  float* mean = nullptr;   // (rows); unused by RMSNorm
  float* rstd = nullptr;   // (rows)
};

class Norm {
 public:
  explicit Norm(ModelContext& context) : context_(context) {}

  /// The stored activations of one norm called `name` ("layers.3.norm1"):
  /// `out_rows` x h of output (the stream's rows, or all T when it is kept
  /// all-gathered), and the statistics of the stream's rows.
  void reserve_activations(NormActivations& a, const std::string& name, std::size_t out_rows, BufferReserver& r);
  /// The backward's column partials, one pass's worth shared by every norm.
  void reserve_workspace(BufferReserver& r);

  /// out = norm(in) with parameters `gamma` and `beta` (tensors; beta kAbsent for RMSNorm).
  void forward(const NormActivations& a, const Bf16* in, int gamma, int beta);
  /// dinp (written; may be dout) = the norm's input gradient from dout, plus
  /// `residual_gradient` (may be dinp, or null): the stream's gradient past
  /// the norm. When residual_biases_from_norms, the column sums of dinp are
  /// added to the gradient of tensor `summed_bias` (kAbsent: none).
  void backward(Bf16* dinp, const Bf16* dout, const Bf16* in, const NormActivations& a, int gamma, int beta,
                const Bf16* residual_gradient, int summed_bias);

 private:
  ModelContext& context_;
  char* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace sextant::engine::transformer
