// What both context-parallel attention cores (the all-gather,
// context_parallel_attention_core.h, and the K/V ring,
// context_parallel_ring_attention_core.h) derive from the shape: this rank's
// tokens as one-GPU flash attention (heads and row strides of Q, K, V), the
// [K | V] block of its two chunks (kernels/context_parallel_kv.h), and the cp
// group they exchange over.
#pragma once

#include <cstddef>

#include "engine/tensor_parallel/collectives.h"
#include "engine/transformer/model_context.h"
#include "kernels/context_parallel_kv.h"
#include "kernels/flash_attention.h"

namespace sextant::engine::transformer {

struct ContextParallelAttentionLayout {
  /// `shape` must have cp > 1 and seq (this rank's tokens of a sequence) a
  /// positive even number; throws std::invalid_argument naming `core` otherwise.
  ContextParallelAttentionLayout(const TransformerShape& shape, const char* core);

  kernels::FlashAttentionShape local;  // this rank's tokens as one-GPU attention: heads and strides
  kernels::ContextParallelKvShape kv;  // batch, cp, chunk tokens c, width W = kv_heads · attention_head_dim
  std::size_t q_row_stride = 0;   // elements between rows of q, dq
  std::size_t kv_row_stride = 0;  // of k, v, dk, dv
  std::size_t q_width = 0;        // heads · attention_head_dim: rows of out, dout
  std::size_t kv_width = 0;       // kv_heads · attention_head_dim

  /// The first row of local chunk j of sequence b among this rank's tokens.
  std::size_t chunk_row(int b, int j) const {
    return to_size(b) * to_size(kv.local_tokens()) + to_size(j) * to_size(kv.chunk_tokens);
  }
  /// Floats of one chunk's LSE, (heads, c): chunk j of sequence b at (2b + j) times this.
  std::size_t lse_chunk() const { return to_size(local.heads) * to_size(kv.chunk_tokens); }

  /// This rank's K and V (rows kv_row_stride apart: column slices of the
  /// fused QKV rows, or padded arrays) copied into `block`, [K | V] contiguous
  /// (kv.block_elements()), on `stream`.
  void pack_kv(kernels::Bf16* block, const kernels::Bf16* k, const kernels::Bf16* v, cudaStream_t stream) const;
};

/// `context`'s cp group; throws std::logic_error naming `core` when the
/// context has none of `cp` ranks (ModelContext::bind's context_parallel).
tensor_parallel::Collectives& context_parallel_group(const ModelContext& context, int cp, const char* core);

}  // namespace sextant::engine::transformer
