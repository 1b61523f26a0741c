// Token embedding plus learned position embedding (GPT-2/3; Llama passes no
// position table and uses rotary embeddings inside attention instead).
//
// The backward is deterministic: tokens are sorted (stable radix sort, CUB),
// and each run of equal tokens is summed by one block in ascending position
// order, so repeated tokens never race and every run gives the same bits. The
// position gradient sums over the batch in order, one thread per element.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/sequence_positions.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// out[b * seq + t, :] = wte[tokens[b * seq + t], :] + wpe[position(t), :]
///   out: (batch * seq, cols) bf16; tokens: (batch * seq) int32, row-major (batch, seq);
///   wte: (vocab, cols) bf16; wpe: (>= positions_end(positions, seq), cols) bf16, or null
///   for no position table. position(t) = position_of(positions, t): t by default, under
///   context parallelism local token t's position in the whole sequence
///   (kernels/sequence_positions.h).
/// Precondition, not checked on the device (that would need a host sync): every
/// token is in [0, vocab). Requires cols % 8 == 0 and 16-byte aligned bf16 pointers.
void embedding_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                       int batch, int seq, int cols, cudaStream_t stream, const SequencePositions& positions = {});

/// Device workspace embedding_backward needs for batch * seq tokens of a
/// vocabulary of `vocab`: three int32 arrays of batch * seq and CUB's sort space.
/// Asks CUB, so it needs a CUDA device.
std::size_t embedding_backward_workspace_bytes(int batch, int seq, int vocab);

/// dwte (vocab, cols) fp32 += the sum of dout's rows over the positions holding each token;
/// dwpe (>= positions_end(positions, seq), cols) fp32: row position(t) += the sum of
/// dout's rows of local token t over the batch; may be null.
/// dout: (batch * seq, cols) bf16. Same token precondition as the forward.
void embedding_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                        int batch, int seq, int vocab, int cols, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream, const SequencePositions& positions = {});

// Vocabulary-parallel embedding (Shoeybi et al. 2019, Sec. 3; Megatron's
// VocabParallelEmbedding): rank r of a tensor-parallel group holds rows
// [vocab_start, vocab_start + vocab_rows) of the table; a token another rank
// holds gives a zero row here, so the sum of the ranks' outputs over the group
// is the embedding. The backward adds to the shard's rows only, deterministic
// as above.

/// out = wte_shard[token - vocab_start] for a token of the shard, else 0; plus
/// wpe[position(t)] when wpe is not null (one rank of the group adds the positions).
void embedding_forward_shard(Bf16* out, const std::int32_t* tokens, const Bf16* wte_shard,
                             const Bf16* wpe, int batch, int seq, int cols, int vocab_start,
                             int vocab_rows, cudaStream_t stream, const SequencePositions& positions = {});

/// embedding_backward's workspace for the sharded backward.
std::size_t embedding_backward_shard_workspace_bytes(int batch, int seq, int vocab_rows);

/// dwte_shard (vocab_rows, cols) += the sum of dout's rows over the positions
/// holding each of the shard's tokens; dwpe as embedding_backward (may be null).
void embedding_backward_shard(float* dwte_shard, float* dwpe, const Bf16* dout,
                              const std::int32_t* tokens, int batch, int seq, int vocab_start,
                              int vocab_rows, int cols, void* workspace, std::size_t workspace_bytes,
                              cudaStream_t stream, const SequencePositions& positions = {});

}  // namespace sextant::kernels
