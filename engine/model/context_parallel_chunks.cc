#include "engine/model/context_parallel_chunks.h"

#include <stdexcept>
#include <string>

namespace sextant::engine {

ContextParallelChunks::ContextParallelChunks(int sequence_tokens, int cp, int rank)
    : sequence_tokens_(sequence_tokens), cp_(cp), rank_(rank) {
  if (cp < 1 || rank < 0 || rank >= cp)
    throw std::invalid_argument("context parallelism: rank " + std::to_string(rank) + " of cp = " +
                                std::to_string(cp) + " is not a rank of the group (0 <= rank < cp, cp >= 1)");
  if (sequence_tokens < 1 || sequence_tokens % (2 * cp) != 0)
    throw std::invalid_argument("context parallelism: the sequence length (" + std::to_string(sequence_tokens) +
                                ") must be a positive multiple of 2·cp = " + std::to_string(2 * cp) +
                                " (the causally load-balanced split cuts it into 2·cp chunks)");
}

}  // namespace sextant::engine
