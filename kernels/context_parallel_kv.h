// Moving K and V, and their gradients, between a context-parallel rank's two
// chunks and the whole sequence: the data movement of the all-gather variant
// of context-parallel attention (Llama 3, Dubey et al. 2024, Sec. 3.3.2: K and
// V all-gathered over the cp group, each rank's queries attend the gathered
// keys; engine/transformer/context_parallel_attention_core.h runs it).
//
// The split is the causally load-balanced one of engine/model/
// context_parallel_chunks.h (its definition; the kernels repeat its two
// formulas on the device and the tests check them against it): a sequence of
// S = 2·cp·c tokens is cut into 2·cp chunks of c tokens; rank r holds chunk r
// as its local tokens [0, c) and chunk 2·cp − 1 − r as its local tokens
// [c, 2c). So global position p is held by
//   chunk g = p / c < cp:  rank g,            local token p % c
//   chunk g >= cp:         rank 2·cp − 1 − g, local token c + p % c.
//
// Layouts (W = kv_heads · head_dim elements per token, L = 2c local tokens):
//   a rank's block   [K (batch, L, W) | V (batch, L, W)]   — what it sends
//   rank-major       cp blocks, block r = rank r's block    — the all-gather's
//                    output, the reduce-scatter's input
//   whole sequence   K, V each (batch, S, W)                — what flash
//                    attention reads
// The kernels only move numbers (and one fp32 sum of two bf16 values, and one
// rounding to bf16), so each is bit-exact against its CPU reference.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

struct ContextParallelKvShape {
  int batch = 0;         // sequences of the micro-batch
  int cp = 0;            // context-parallel ranks
  int chunk_tokens = 0;  // c = S / (2·cp)
  int width = 0;         // elements of one token's K (or V): kv_heads · head_dim, a multiple of 8

  int local_tokens() const { return 2 * chunk_tokens; }
  int sequence_tokens() const { return 2 * cp * chunk_tokens; }
  /// Elements of one rank's block, [K | V] of its local tokens: 2·batch·L·W.
  std::size_t block_elements() const {
    return 2 * static_cast<std::size_t>(batch) * static_cast<std::size_t>(local_tokens()) *
           static_cast<std::size_t>(width);
  }
  /// Elements of K (or V) of the whole sequences: batch·S·W.
  std::size_t sequence_elements() const {
    return static_cast<std::size_t>(batch) * static_cast<std::size_t>(sequence_tokens()) *
           static_cast<std::size_t>(width);
  }
};

/// Empty when the kernels below take `shape`: batch, cp, chunk_tokens positive,
/// width a positive multiple of 8 (16-byte vectors); otherwise every reason, with the values.
std::string context_parallel_kv_problem(const ContextParallelKvShape& shape);

/// K and V of the whole sequences, in sequence order, from the rank-major
/// all-gather of every rank's block:
/// k_full, v_full: (batch, S, W) bf16, written;
/// gathered: (cp, 2, batch, L, W) bf16, block r = rank r's [K | V].
/// Throws KernelArgumentError (before launching) for a rejected shape, a null
/// or not 16-byte aligned pointer.
void gather_sequence_kv(Bf16* k_full, Bf16* v_full, const Bf16* gathered, const ContextParallelKvShape& shape,
                        cudaStream_t stream);

/// The key and value gradients of a rank's two local chunks, each over the
/// keys that chunk saw: chunk j's queries attended positions [0, visible_tokens[j])
/// (flash attention's kv_seq), so dk[j], dv[j] are (batch, visible_tokens[j], W) bf16.
struct ChunkKvGradients {
  const Bf16* dk[2] = {nullptr, nullptr};
  const Bf16* dv[2] = {nullptr, nullptr};
  int visible_tokens[2] = {0, 0};
};

/// rank_major: (cp, 2, batch, L, W) fp32, written: block r = [dK | dV] at rank
/// r's local tokens of dk[0] + dk[1] (and dv[0] + dv[1]), each counted as 0 at
/// positions past its visible_tokens; the sum in fp32. The reduce-scatter of
/// rank_major over the cp group then leaves each rank the gradient of its own K and V.
/// Throws KernelArgumentError (before launching) for a rejected shape, a
/// visible_tokens outside [1, S], a null or not 16-byte aligned pointer.
void sum_chunk_kv_gradients(float* rank_major, const ChunkKvGradients& chunks, const ContextParallelKvShape& shape,
                            cudaStream_t stream);

/// A rank's block of fp32 gradients to bf16 (round to nearest even) in its K
/// and V layout: local = [dK (batch, L, W) | dV (batch, L, W)] fp32; dk, dv:
/// batch·L token rows `row_stride` elements apart (0 means W: contiguous), of
/// which only the first W elements are written, so they may be column slices
/// of a fused (tokens, [Q | K | V]) gradient.
/// Throws KernelArgumentError (before launching) for a rejected shape, a
/// row_stride neither 0 nor a multiple of 8 at least W, a null or not 16-byte
/// aligned pointer.
void store_local_kv_gradients(Bf16* dk, Bf16* dv, int row_stride, const float* local,
                              const ContextParallelKvShape& shape, cudaStream_t stream);

}  // namespace sextant::kernels
