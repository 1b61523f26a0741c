// The embedding, Megatron-Core's LanguageModelEmbedding: each token's row of
// wte, plus its position's row of wpe for GPT's learned positions (RoPE
// models rotate Q and K in the attention block instead). Under tensor
// parallelism the table is vocabulary-parallel (VocabParallelEmbedding;
// Shoeybi et al. 2019, Sec. 3): each rank looks up the tokens of its rows
// (zeros for the others'), the rank that adds the group's replicated terms
// adds the positions, and the sum over the group is the embedding —
// all-reduced, or under sequence parallelism reduce-scattered onto each rank's
// tokens (Korthikanti et al. 2022).
//
// The tables' gradients are scatter-added (rows of tokens a micro-batch lacks
// are not touched), so unlike the other parameters they are always added to:
// the trainer zeroes them each step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/transformer/arena_buffers.h"
#include "engine/transformer/model_context.h"
#include "engine/transformer/residual_stream.h"

namespace sextant::engine::transformer {

class Embedding {
 public:
  Embedding(ModelContext& context, ResidualStream& stream) : context_(context), stream_(stream) {}

  /// The step's tokens: `microbatches` micro-batches of T.
  void reserve_tokens(int microbatches, BufferReserver& r);
  /// The backward's sort space.
  void reserve_workspace(BufferReserver& r);

  /// Micro-batch `mb`'s tokens into the first layer's input.
  void forward(int mb);
  /// The tables' gradients (added) from the residual stream's gradient.
  void backward(int mb);

  /// (microbatches x T): the trainer uploads them.
  std::int32_t* tokens() const { return tokens_; }

 private:
  const std::int32_t* tokens_of(int mb) const;

  ModelContext& context_;
  ResidualStream& stream_;
  std::int32_t* tokens_ = nullptr;
  char* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace sextant::engine::transformer
