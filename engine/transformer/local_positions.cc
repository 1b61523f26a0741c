#include "engine/transformer/local_positions.h"

#include "engine/model/context_parallel_chunks.h"

namespace sextant::engine::transformer {

kernels::SequencePositions local_positions(const ModelContext& context) {
  const tensor_parallel::Collectives* cp = context.cp();
  if (cp == nullptr) return {};
  const TransformerShape& s = context.shape();
  const ContextParallelChunks split(s.seq * s.cp, s.cp, cp->rank());
  kernels::SequencePositions p;
  p.chunk_tokens = split.chunk_tokens();
  p.chunk_start[0] = split.chunk_start(0);
  p.chunk_start[1] = split.chunk_start(1);
  return p;
}

}  // namespace sextant::engine::transformer
