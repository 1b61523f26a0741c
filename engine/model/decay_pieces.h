// Walking a range of the flat parameter buffers in the pieces AdamW updates
// alike: inside a decayed range (ParameterLayout::decayed_ranges) with the
// step's weight decay, between them without (Loshchilov & Hutter 2019:
// decoupled weight decay on the weights; Megatron exempts biases and norms).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "engine/model/parameter_layout.h"  // ElementRange

namespace sextant::engine {

/// Calls piece(from, to, decayed) for the consecutive non-empty pieces of
/// [begin, end), in order: decayed = true inside one of `decayed` (sorted,
/// disjoint [begin, end) ranges), false between them.
template <typename Piece>
void for_each_decay_piece(std::size_t begin, std::size_t end,
                          const std::vector<ElementRange>& decayed, Piece&& piece) {
  std::size_t cursor = begin;
  for (const auto& [first, last] : decayed) {
    if (last <= cursor) continue;
    if (first >= end) break;
    if (first > cursor) piece(cursor, first, false);
    cursor = std::max(first, cursor);
    const std::size_t to = std::min(last, end);
    piece(cursor, to, true);
    cursor = to;
  }
  if (cursor < end) piece(cursor, end, false);
}

}  // namespace sextant::engine
