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
#include "kernels/stream.h"

namespace sextant::kernels {

/// out[b * seq + t, :] = wte[tokens[b * seq + t], :] + wpe[t, :]
///   out: (batch * seq, cols) bf16; tokens: (batch * seq) int32, row-major (batch, seq);
///   wte: (vocab, cols) bf16; wpe: (>= seq, cols) bf16, or null for no position table.
/// Precondition, not checked on the device (that would need a host sync): every
/// token is in [0, vocab). Requires cols % 8 == 0 and 16-byte aligned bf16 pointers.
void embedding_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                       int batch, int seq, int cols, cudaStream_t stream);

/// Device workspace embedding_backward needs for batch * seq tokens of a
/// vocabulary of `vocab`: three int32 arrays of batch * seq and CUB's sort space.
/// Asks CUB, so it needs a CUDA device.
std::size_t embedding_backward_workspace_bytes(int batch, int seq, int vocab);

/// dwte (vocab, cols) fp32 += the sum of dout's rows over the positions holding each token;
/// dwpe (>= seq, cols) fp32 += the sum of dout's rows over the batch; may be null.
/// dout: (batch * seq, cols) bf16. Same token precondition as the forward.
void embedding_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                        int batch, int seq, int vocab, int cols, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace sextant::kernels
