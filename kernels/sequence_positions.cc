#include "kernels/sequence_positions.h"

#include <algorithm>

namespace sextant::kernels {

std::string sequence_positions_problem(const SequencePositions& p, int seq) {
  if (p.chunk_tokens == 0) return "";
  const std::string values = "chunk_tokens " + std::to_string(p.chunk_tokens) + ", chunk_start {" +
                             std::to_string(p.chunk_start[0]) + ", " + std::to_string(p.chunk_start[1]) + "}";
  if (p.chunk_tokens < 0 || 2LL * p.chunk_tokens != seq)
    return values + ": two chunks must hold the seq (" + std::to_string(seq) + ") local tokens, chunk_tokens = seq / 2";
  if (p.chunk_start[0] < 0 || p.chunk_start[1] < 0) return values + ": chunk starts must be non-negative";
  const int lo = std::min(p.chunk_start[0], p.chunk_start[1]), hi = std::max(p.chunk_start[0], p.chunk_start[1]);
  if (hi - lo < p.chunk_tokens) return values + ": the two chunks overlap";
  return "";
}

int positions_end(const SequencePositions& p, int seq) {
  if (p.chunk_tokens == 0) return seq;
  return std::max(p.chunk_start[0], p.chunk_start[1]) + p.chunk_tokens;
}

}  // namespace sextant::kernels
