// Where this rank's tokens of a sequence sit in the whole sequence, as the
// position-dependent kernels take it (kernels/sequence_positions.h): without
// context parallelism token t at position t; with it (the model context's cp
// group, cp > 1) the rank's two chunks of the causally load-balanced split
// (engine/model/context_parallel_chunks.h). RoPE in the attention block and
// the learned position table in the embedding read it, so both place a token
// where one GPU training the whole sequence would.
#pragma once

#include "engine/transformer/model_context.h"
#include "kernels/sequence_positions.h"

namespace sextant::engine::transformer {

/// The positions of `context`'s local tokens: the default (t) without a cp
/// group; after bind with one, chunk_tokens = seq / 2 and each chunk's first
/// position in the sequence of seq·cp tokens.
kernels::SequencePositions local_positions(const ModelContext& context);

}  // namespace sextant::engine::transformer
