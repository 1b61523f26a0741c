#include "engine/transformer/embedding.h"

#include "engine/transformer/local_positions.h"
#include "kernels/embedding.h"

namespace sextant::engine::transformer {

void Embedding::reserve_tokens(int microbatches, BufferReserver& r) {
  const std::size_t step_tokens = to_size(context_.shape().tokens()) * to_size(microbatches);
  r.shared(tokens_, "tokens", MemoryCategory::kOther, step_tokens);
}

void Embedding::reserve_workspace(BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  workspace_bytes_ = s.tp > 1 ? kernels::embedding_backward_shard_workspace_bytes(s.micro_batch, s.seq, s.vocab)
                              : kernels::embedding_backward_workspace_bytes(s.micro_batch, s.seq, s.vocab);
  r.shared(workspace_, "workspace.embedding", MemoryCategory::kOther, workspace_bytes_);
}

const std::int32_t* Embedding::tokens_of(int mb) const {
  return tokens_ + static_cast<std::ptrdiff_t>(mb) * context_.shape().tokens();
}

void Embedding::forward(int mb) {
  const TransformerShape& s = context_.shape();
  const ParameterLayout& layout = context_.layout();
  Bf16* out = stream_.first_input();
  tensor_parallel::Collectives* tp = context_.tp();
  if (tp == nullptr) {
    kernels::embedding_forward(out, tokens_of(mb), context_.weight(layout.wte()), context_.weight(layout.wpe()),
                               s.micro_batch, s.seq, s.hidden, context_.stream(), local_positions(context_));
    return;
  }
  Bf16* partial = s.sequence_parallel ? stream_.scratch : out;
  kernels::embedding_forward_shard(partial, tokens_of(mb), context_.weight(layout.wte()),
                                   context_.adds_replicated_terms() ? context_.weight(layout.wpe()) : nullptr,
                                   s.micro_batch, s.seq, s.hidden, s.vocab_start(tp->rank()), s.vocab,
                                   context_.stream(), local_positions(context_));
  if (s.sequence_parallel)
    tp->reduce_scatter(partial, out, to_size(s.norm_tokens() * s.hidden));
  else
    tp->all_reduce(out, to_size(s.tokens() * s.hidden));
}

void Embedding::backward(int mb) {
  const TransformerShape& s = context_.shape();
  const ParameterLayout& layout = context_.layout();
  tensor_parallel::Collectives* tp = context_.tp();
  if (tp == nullptr) {
    kernels::embedding_backward(context_.gradient(layout.wte()), context_.gradient(layout.wpe()), stream_.gradient,
                                tokens_of(mb), s.micro_batch, s.seq, s.vocab, s.hidden, workspace_,
                                workspace_bytes_, context_.stream(), local_positions(context_));
    return;
  }
  // Every rank needs the gradient of every token for its rows, and computes
  // the position table's gradient (replicated) from all of them alike.
  const Bf16* dout = stream_.gradient;
  if (s.sequence_parallel) {
    Bf16* gathered = context_.sequence_parallel().buffers.gathered_gradient;
    tp->all_gather(stream_.gradient, gathered, to_size(s.norm_tokens() * s.hidden));
    dout = gathered;
  }
  kernels::embedding_backward_shard(context_.gradient(layout.wte()), context_.gradient(layout.wpe()), dout,
                                    tokens_of(mb), s.micro_batch, s.seq, s.vocab_start(tp->rank()), s.vocab,
                                    s.hidden, workspace_, workspace_bytes_, context_.stream(), local_positions(context_));
}

}  // namespace sextant::engine::transformer
