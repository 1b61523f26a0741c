// Where a rank's local tokens of a sequence sit in the whole sequence, for the
// kernels that depend on a token's position (rotary embeddings, the learned
// position table). Without context parallelism local token t is at position t.
// Under context parallelism (engine/model/context_parallel_chunks.h: the
// causally load-balanced split of Megatron-Core) a rank's seq local tokens are
// two chunks of chunk_tokens each, back to back, and local chunk j's first
// token is at position chunk_start[j] of the whole sequence.
#pragma once

#include <string>

#ifdef __CUDACC__
#define SEXTANT_HOST_DEVICE __host__ __device__
#else
#define SEXTANT_HOST_DEVICE
#endif

namespace sextant::kernels {

struct SequencePositions {
  int chunk_tokens = 0;          // 0: no chunks, local token t at position t
  int chunk_start[2] = {0, 0};   // the positions of local chunk 0's and chunk 1's first tokens
};

/// The position in the whole sequence of local token `t` (0 <= t < seq).
SEXTANT_HOST_DEVICE inline int position_of(const SequencePositions& p, int t) {
  if (p.chunk_tokens == 0) return t;
  return t < p.chunk_tokens ? p.chunk_start[0] + t : p.chunk_start[1] + (t - p.chunk_tokens);
}

/// Empty when `p` describes `seq` local tokens (no chunks, or two chunks of
/// seq / 2 tokens at non-negative, non-overlapping starts); otherwise why not,
/// with the values.
std::string sequence_positions_problem(const SequencePositions& p, int seq);

/// One past the largest position of `seq` local tokens: the rows a position
/// table needs (seq without chunks).
int positions_end(const SequencePositions& p, int seq);

}  // namespace sextant::kernels
