#include "engine/transformer/output_layer.h"

#include "kernels/cross_entropy.h"

namespace sextant::engine::transformer {
namespace {
constexpr auto kAct = MemoryCategory::kActivations;
}  // namespace

OutputLayer::OutputLayer(ModelContext& context, ResidualStream& stream, Norm& norm)
    : context_(context),
      stream_(stream),
      norm_(norm),
      lm_head_(context.runtime(), static_cast<int>(context.shape().tokens())) {}

void OutputLayer::reserve_stored(BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  norm_.reserve_activations(final_norm_, "final_norm", T, r);
  r.own(logits_, "logits", kAct, T * to_size(s.vocab));
}

void OutputLayer::reserve_cross_entropy(BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  tensor_parallel::VocabParallelCrossEntropy::Buffers& b = cross_entropy_.buffers;
  r.shared(b.row_max_local, "ce.row_max_local", kAct, T);
  r.shared(b.row_max_gathered, "ce.row_max_gathered", kAct, T * to_size(s.tp));
  r.shared(b.row_max, "ce.row_max", kAct, T);
  r.shared(b.partials, "ce.partials", kAct, 2 * T);
}

void OutputLayer::reserve_targets(int microbatches, BufferReserver& r) {
  const std::size_t step_tokens = to_size(context_.shape().tokens()) * to_size(microbatches);
  r.shared(targets_, "targets", MemoryCategory::kOther, step_tokens);
  r.shared(losses_, "losses", MemoryCategory::kOther, step_tokens);
}

void OutputLayer::forward(int mb, float loss_scale) {
  const TransformerShape& s = context_.shape();
  const ParameterLayout& layout = context_.layout();
  const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(mb) * s.tokens();
  const int T = static_cast<int>(s.tokens());
  tensor_parallel::Collectives* tp = context_.tp();
  if (s.sequence_parallel) {
    // The norm on this rank's tokens, all-gathered for the output layer.
    NormActivations shard = final_norm_;
    shard.out = context_.sequence_parallel().buffers.norm_shard;
    norm_.forward(shard, stream_.final_input, layout.final_norm_gamma(), layout.final_norm_beta());
    tp->all_gather(shard.out, final_norm_.out, to_size(s.norm_tokens() * s.hidden));
  } else {
    norm_.forward(final_norm_, stream_.final_input, layout.final_norm_gamma(), layout.final_norm_beta());
  }
  lm_head_.forward(logits_, final_norm_.out, context_.linear(layout.lm_head(), LayerTensors::kAbsent, s.hidden, s.vocab));
  if (tp == nullptr) {
    kernels::softmax_cross_entropy(losses_ + first, logits_, logits_, targets_ + first, T, s.vocab, loss_scale,
                                   context_.stream());
    return;
  }
  cross_entropy_.forward(losses_ + first, logits_, targets_ + first, T, s.vocab, s.vocab_start(tp->rank()),
                         loss_scale, *tp);
}

void OutputLayer::backward() {
  const TransformerShape& s = context_.shape();
  const ParameterLayout& layout = context_.layout();
  tensor_parallel::Collectives* tp = context_.tp();
  lm_head_.backward(stream_.scratch, logits_, final_norm_.out,
                    context_.linear(layout.lm_head(), LayerTensors::kAbsent, s.hidden, s.vocab));
  const Bf16* dnorm = stream_.scratch;
  if (s.sequence_parallel) {
    Bf16* shard = context_.sequence_parallel().buffers.gradient_shard;
    tp->reduce_scatter(stream_.scratch, shard, to_size(s.norm_tokens() * s.hidden));
    dnorm = shard;
  } else if (tp != nullptr) {
    tp->all_reduce(stream_.scratch, to_size(s.tokens() * s.hidden));
  }
  // The residual stream's gradient starts here: written, not added.
  const int last_fc2_bias = s.num_layers > 0 ? layout.layer(s.num_layers - 1).fc2_bias : LayerTensors::kAbsent;
  norm_.backward(stream_.gradient, dnorm, stream_.final_input, final_norm_, layout.final_norm_gamma(),
                 layout.final_norm_beta(), nullptr, last_fc2_bias);
}

}  // namespace sextant::engine::transformer
