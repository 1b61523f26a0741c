// Which tokens of a sequence a context-parallel rank holds: the causally
// load-balanced split of Megatron-Core's context parallelism (Korthikanti et
// al.'s successors; NVIDIA, "Context parallelism", Megatron-Core docs; Liu et
// al. 2023 "Ring Attention" for the split itself). The sequence of S tokens is
// cut into 2·cp chunks of S / (2·cp); rank r holds chunk r and chunk
// 2·cp − 1 − r, so under a causal mask every rank attends the same number of
// (query, key) pairs: chunk r sees r + 1 chunks of keys, chunk 2·cp − 1 − r
// sees 2·cp − r, together 2·cp + 1 on every rank.
//
// A rank's local sequence is its two chunks back to back: local token t is
// chunk 0's token t for t < chunk_tokens, else chunk 1's. With cp = 1 the
// "two chunks" are the two halves of the sequence in order, so every formula
// below is the identity.
#pragma once

#include <cstdint>

namespace sextant::engine {

class ContextParallelChunks {
 public:
  /// `sequence_tokens` S must be a positive multiple of 2·cp; 0 <= rank < cp.
  /// Throws std::invalid_argument otherwise (naming the values).
  ContextParallelChunks(int sequence_tokens, int cp, int rank);

  int cp() const { return cp_; }
  int rank() const { return rank_; }
  int sequence_tokens() const { return sequence_tokens_; }
  /// Tokens of one chunk, S / (2·cp).
  int chunk_tokens() const { return sequence_tokens_ / (2 * cp_); }
  /// Tokens of this rank's share of a sequence, S / cp (two chunks).
  int local_tokens() const { return sequence_tokens_ / cp_; }
  /// The global chunk index of local chunk 0 or 1 (of `rank`, default this rank's).
  int chunk_index(int local_chunk) const { return chunk_index(local_chunk, rank_); }
  int chunk_index(int local_chunk, int rank) const { return local_chunk == 0 ? rank : 2 * cp_ - 1 - rank; }
  /// The position in the whole sequence of local chunk 0 or 1's first token.
  int chunk_start(int local_chunk) const { return chunk_index(local_chunk) * chunk_tokens(); }
  /// The position in the whole sequence of local token `t` (0 <= t < local_tokens()).
  int global_position(int t) const {
    const int c = chunk_tokens();
    return chunk_start(t / c) + t % c;
  }
  /// Keys a local chunk's queries see under the causal mask: every position up
  /// to the chunk's end, (chunk_index + 1)·chunk_tokens (bottom-right aligned).
  int visible_keys(int local_chunk) const { return (chunk_index(local_chunk) + 1) * chunk_tokens(); }

 private:
  int sequence_tokens_;
  int cp_;
  int rank_;
};

}  // namespace sextant::engine
