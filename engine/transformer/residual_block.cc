#include "engine/transformer/residual_block.h"

#include "kernels/residual.h"

namespace sextant::engine::transformer {

std::string layer_prefix(int layer) { return "layers." + std::to_string(layer) + "."; }

ResidualBlock::ResidualBlock(ModelContext& context, ResidualStream& stream, Norm& norm, std::string norm_name)
    : context_(context),
      stream_(stream),
      norm_(norm),
      norm_name_(std::move(norm_name)),
      norms_(to_size(context.shape().num_layers)) {}

void ResidualBlock::reserve_layer(int layer, BufferReserver& r) {
  norm_.reserve_activations(norms_[to_size(layer)], layer_prefix(layer) + norm_name_,
                            to_size(context_.shape().norm_tokens()), r);
  reserve_stored(layer, r);
}

void ResidualBlock::bind(bool full_recompute) {
  if (!full_recompute) return;
  for (std::size_t i = 1; i < norms_.size(); ++i) norms_[i] = norms_[0];
}

const Bf16* ResidualBlock::normed_input(int layer) {
  if (context_.shape().sequence_parallel) return context_.sequence_parallel().buffers.gathered_input;
  const Ends e = ends(layer);
  const NormActivations& n = norms_[to_size(layer)];
  norm_.forward(n, e.input, e.norm_gamma, e.norm_beta);
  return n.out;
}

const Bf16* ResidualBlock::stored_normed_input(int layer) const {
  if (context_.shape().sequence_parallel) return context_.sequence_parallel().buffers.gathered_input;
  return norms_[to_size(layer)].out;
}

void ResidualBlock::project_to_output(tensor_parallel::RowParallelLinear& linear, int layer, const Bf16* x,
                                      const tensor_parallel::LinearParameters& p) {
  if (context_.shape().sequence_parallel) {  // partial sums, reduce-scattered by the next task
    linear.forward_partial_sums(stream_.scratch, x, p);
    return;
  }
  // Row-parallel under tp: the partial products summed over the group by the
  // all-reduce task after this one, the bias and the residual added by one rank.
  const Ends e = ends(layer);
  linear.forward(e.output, x, p, e.input);
}

const Bf16* ResidualBlock::output_gradient() const {
  if (context_.shape().sequence_parallel) return context_.sequence_parallel().buffers.gathered_gradient;
  return stream_.gradient;
}

int ResidualBlock::output_bias_in_backward(int layer) const {
  const TransformerShape& s = context_.shape();
  if (s.residual_biases_from_norms() || s.sequence_parallel) return LayerTensors::kAbsent;
  return ends(layer).output_bias;
}

void ResidualBlock::finish_backward(int layer) {
  if (context_.tp() == nullptr) norm_backward(layer, stream_.scratch);
}

void ResidualBlock::norm_backward(int layer, const Bf16* dnorm) {
  const Ends e = ends(layer);
  norm_.backward(stream_.gradient, dnorm, e.input, norms_[to_size(layer)], e.norm_gamma, e.norm_beta,
                 stream_.gradient, e.input_bias);
}

// ---- tensor parallelism's tasks ----

void ResidualBlock::tp_gather(int layer, bool backward) {
  const TransformerShape& s = context_.shape();
  tensor_parallel::SequenceParallel& sp = context_.sequence_parallel();
  const Ends e = ends(layer);
  const NormActivations& n = norms_[to_size(layer)];
  if (!backward) {
    // The norm on this rank's tokens, all-gathered: the column-parallel GEMM's input.
    norm_.forward(n, e.input, e.norm_gamma, e.norm_beta);
    sp.gather_input(n.out);
    return;
  }
  // The row-parallel GEMM's output gradient for all tokens, and the
  // column-parallel GEMM's input again for its weight gradient (stored
  // sharded: Korthikanti et al. 2022, Sec. 4.2.2, as Megatron re-gathers it).
  if (!s.residual_biases_from_norms() && e.output_bias != LayerTensors::kAbsent) {
    // The bias was added on this rank's tokens: their column sums, summed over
    // the group with the norms' gradients (ParameterLayout: partial_gradient_over_tp).
    tensor_parallel::bias_gradient(context_.runtime(), context_.gradient(e.output_bias), stream_.gradient,
                                   static_cast<int>(s.norm_tokens()), s.hidden);
  }
  sp.gather_output_gradient(stream_.gradient);
  // The norm's output, first read by the column-parallel weight gradient at
  // the block's end, travels while the block's other GEMMs run
  // (ColumnParallelLinear::backward).
  sp.start_input_gather(n.out);
}

void ResidualBlock::tp_scatter(int layer, bool backward, bool recompute) {
  tensor_parallel::SequenceParallel& sp = context_.sequence_parallel();
  if (!backward) {
    if (recompute && !recompute_writes_output()) return;
    // This rank's tokens of the row-parallel output, plus the residual and the bias.
    const Ends e = ends(layer);
    sp.scatter_output(stream_.scratch, e.output);
    kernels::residual_bias_add(e.output, e.output, e.input, context_.weight(e.output_bias),
                               static_cast<int>(context_.shape().norm_tokens()), context_.shape().hidden,
                               context_.stream());
    return;
  }
  // The column-parallel GEMM's input gradient on this rank's tokens, then the norm's backward.
  sp.finish_input_gradient_scatter(stream_.scratch);
  norm_backward(layer, sp.buffers.gradient_shard);
}

void ResidualBlock::tp_all_reduce(int layer, bool backward, bool recompute) {
  const std::size_t count = to_size(context_.shape().tokens() * context_.shape().hidden);
  if (!backward) {
    if (recompute && !recompute_writes_output()) return;
    context_.tp()->all_reduce(ends(layer).output, count);
    return;
  }
  context_.tp()->all_reduce(stream_.scratch, count);
  norm_backward(layer, stream_.scratch);
}

}  // namespace sextant::engine::transformer
