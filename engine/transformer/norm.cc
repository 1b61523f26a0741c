#include "engine/transformer/norm.h"

#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"

namespace sextant::engine::transformer {

// The shape says when the norms sum the residual projections' bias gradients
// (sim/core/transformer_shape.h, which the simulator's engine kernel list
// reads too); the kernel is what can.
static_assert(kernels::kNormBackwardMaxSummedCols == sim::kNormSumsResidualBiasMaxHidden,
              "sim/core/transformer_shape.h must state the norm backward's limit of kernels/layernorm.h");

void Norm::reserve_activations(NormActivations& a, const std::string& name, std::size_t out_rows,
                               BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t rows = to_size(s.norm_tokens());
  r.own(a.out, name, MemoryCategory::kActivations, out_rows * to_size(s.hidden));
  r.own(a.mean, name + "_mean", MemoryCategory::kActivations, rows);
  r.own(a.rstd, name + "_rstd", MemoryCategory::kActivations, rows);
}

void Norm::reserve_workspace(BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const int rows = static_cast<int>(s.tokens());
  workspace_bytes_ = s.layernorm ? kernels::layernorm_backward_workspace_bytes(rows, s.hidden)
                                 : kernels::rmsnorm_backward_workspace_bytes(rows, s.hidden);
  r.shared(workspace_, "workspace.norm", MemoryCategory::kOther, workspace_bytes_);
}

void Norm::forward(const NormActivations& a, const Bf16* in, int gamma, int beta) {
  const TransformerShape& s = context_.shape();
  const int rows = static_cast<int>(s.norm_tokens());
  if (s.layernorm)
    kernels::layernorm_forward(a.out, a.mean, a.rstd, in, context_.weight(gamma), context_.weight(beta), rows,
                               s.hidden, s.norm_eps, context_.stream());
  else
    kernels::rmsnorm_forward(a.out, a.rstd, in, context_.weight(gamma), rows, s.hidden, s.norm_eps,
                             context_.stream());
}

void Norm::backward(Bf16* dinp, const Bf16* dout, const Bf16* in, const NormActivations& a, int gamma, int beta,
                    const Bf16* residual_gradient, int summed_bias) {
  const TransformerShape& s = context_.shape();
  const int rows = static_cast<int>(s.norm_tokens());
  kernels::NormBackwardOptions options;
  options.residual_grad = residual_gradient;
  options.accumulate_param_grads = context_.accumulate_gradients();
  if (s.residual_biases_from_norms()) options.dinp_column_sums = context_.gradient(summed_bias);
  if (s.layernorm)
    kernels::layernorm_backward(dinp, context_.gradient(gamma), context_.gradient(beta), dout, in,
                                context_.weight(gamma), a.mean, a.rstd, rows, s.hidden, workspace_,
                                workspace_bytes_, context_.stream(), options);
  else
    kernels::rmsnorm_backward(dinp, context_.gradient(gamma), dout, in, context_.weight(gamma), a.rstd, rows,
                              s.hidden, workspace_, workspace_bytes_, context_.stream(), options);
}

}  // namespace sextant::engine::transformer
