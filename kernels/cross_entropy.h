// Softmax cross-entropy over the vocabulary, fused with its gradient.
//
// The language-model head writes bf16 logits (rows, vocab); this kernel makes
// two passes over each row (online max and sum of exponentials, Milakov &
// Gimelshein 2018; then the gradient), from a copy of the row in shared memory
// when it fits (vocab x 2 bytes within the GPU's per-block limit: 227 KiB on
// an H100, so up to ~116k entries), else from memory twice, and never stores
// fp32 logits or probabilities for the batch: for GPT-1.3B at micro-batch 4 those would be 4 x 2048 x 51200 x 4 bytes
// = 1.6 GiB. The gradient may overwrite the logits in place.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// losses[r] = logsumexp(logits[r, :]) - logits[r, targets[r]]   (rows) fp32.
/// dlogits[r, :] = (softmax(logits[r, :]) - onehot(targets[r])) * grad_scale   (rows, vocab)
///   bf16, written; may equal logits (in place) or be null (loss only).
/// grad_scale is d(total loss)/d(losses[r]), e.g. 1 / (tokens in the global batch).
/// A negative target marks an ignored row (padding): its loss and gradient are 0.
/// Precondition, not checked on the device: targets < vocab.
/// Requires vocab % 8 == 0 (pad the vocabulary, as Megatron's
/// --make-vocab-size-divisible-by does) and 16-byte aligned logits and dlogits.
void softmax_cross_entropy(float* losses, Bf16* dlogits, const Bf16* logits,
                           const std::int32_t* targets, int rows, int vocab, float grad_scale,
                           cudaStream_t stream);

}  // namespace sextant::kernels
