#include "engine/transformer/mlp.h"

#include "kernels/swiglu.h"

namespace sextant::engine::transformer {
namespace {
constexpr auto kAct = MemoryCategory::kActivations;
}  // namespace

Mlp::Mlp(ModelContext& context, ResidualStream& stream, Norm& norm)
    : ResidualBlock(context, stream, norm, "norm2"),
      stored_(to_size(context.shape().num_layers)),
      fc1_(context.runtime(), static_cast<int>(context.shape().tokens())),
      fc2_(context.runtime(), static_cast<int>(context.shape().tokens())) {}

ResidualBlock::Ends Mlp::ends(int layer) const {
  const LayerTensors& w = context_.layout().layer(layer);
  Ends e;
  e.input = stream_.mid[to_size(layer)];
  e.output = stream_.next_input(layer);
  e.norm_gamma = w.norm2_gamma;
  e.norm_beta = w.norm2_beta;
  e.output_bias = w.fc2_bias;
  e.input_bias = w.proj_bias;
  return e;
}

void Mlp::reserve_stored(int layer, BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  Stored& a = stored_[to_size(layer)];
  const std::string p = layer_prefix(layer);
  r.own(a.fc1_out, p + "fc1_out", kAct, T * to_size(s.fc1_width()));
  r.own(a.act, p + "act", kAct, T * to_size(s.ffn_hidden));
}

void Mlp::reserve_pass(BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  r.shared(dact_, "grad.act", kAct, T * to_size(s.ffn_hidden));
  if (!s.gelu) r.shared(dfc1_, "grad.fc1_out", kAct, T * to_size(s.fc1_width()));
}

void Mlp::bind(bool full_recompute) {
  ResidualBlock::bind(full_recompute);
  if (full_recompute)
    for (std::size_t i = 1; i < stored_.size(); ++i) stored_[i] = stored_[0];
}

void Mlp::forward(int layer, bool recompute) {
  const TransformerShape& s = context_.shape();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  const Bf16* x = normed_input(layer);
  if (s.gelu) {
    fc1_.forward(fc1_.gelu_forward_args(a.act, a.fc1_out, x,
                                        context_.linear(w.fc1_weight, w.fc1_bias, s.hidden, s.ffn_hidden)));
  } else {
    fc1_.forward(fc1_.forward_args(a.fc1_out, x, context_.linear(w.fc1_weight, w.fc1_bias, s.hidden, s.fc1_width())));
    kernels::swiglu_forward(a.act, a.fc1_out, static_cast<int>(s.tokens()), s.ffn_hidden, context_.stream());
  }
  if (recompute) return;  // the next layer's input is still stored
  project_to_output(fc2_, layer, a.act, context_.linear(w.fc2_weight, w.fc2_bias, s.ffn_hidden, s.hidden));
}

void Mlp::backward(int layer) {
  const TransformerShape& s = context_.shape();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  // y = act W2^T + b2 feeds the residual: dy is the stream's gradient.
  const Bf16* dy = output_gradient();
  const tensor_parallel::LinearParameters fc2 =
      context_.linear(w.fc2_weight, output_bias_in_backward(layer), s.ffn_hidden, s.hidden);
  const tensor_parallel::LinearParameters fc1 = context_.linear(w.fc1_weight, w.fc1_bias, s.hidden, s.fc1_width());
  if (s.gelu) {
    // dact_ = d(fc1_out): GELU's derivative applied in fc2's input-gradient
    // GEMM; fc1's bias gradient is then its column sum, as for any linear layer.
    fc2_.backward(dact_, dy, a.act, fc2, a.fc1_out);
    fc1_.backward(stream_.scratch, dact_, stored_normed_input(layer), fc1);
  } else {
    fc2_.backward(dact_, dy, a.act, fc2);
    kernels::swiglu_backward(dfc1_, dact_, a.fc1_out, static_cast<int>(s.tokens()), s.ffn_hidden,
                             context_.stream());
    fc1_.backward(stream_.scratch, dfc1_, stored_normed_input(layer), fc1);
  }
  // Under tp, fc1 is column-parallel and each rank's input gradient a partial
  // sum: the collective task after this one sums it and runs the norm's backward.
  finish_backward(layer);
}

}  // namespace sextant::engine::transformer
