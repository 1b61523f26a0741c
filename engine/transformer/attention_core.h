// The attention core of a self-attention block: softmax(Q Kᵀ / sqrt(d)) V,
// causal, on Q, K and V already projected (and rotated) — Megatron-Core's
// core_attention (DotProductAttention / TEDotProductAttention) inside
// SelfAttention. The block (attention.h) owns the projections and the stored
// activations; a core owns how the scores are computed and what it needs for
// that beyond them (workspaces, and for a context-parallel ring attention the
// peers' K and V and the Plan's ring tasks).
//
// Q, K, V are in the kernels' layout, (tokens, heads, attention_head_dim)
// with their row strides (kernels/flash_attention.h: FlashAttentionShape),
// the output (tokens, heads, attention_head_dim) and its log-sum-exp
// (micro_batch · heads · seq floats, laid out as the core chooses: flash
// attention's (micro_batch, heads, seq), the context-parallel core's per chunk)
// stored for the backward.
#pragma once

#include "engine/transformer/arena_buffers.h"
#include "kernels/bf16.h"

namespace sextant::engine::transformer {

class AttentionCore {
 public:
  virtual ~AttentionCore() = default;
  /// The core's buffers beyond the block's (one pass's, ArenaPlan::add_shared).
  virtual void reserve(BufferReserver& r) = 0;
  /// out and lse (written) from q, k, v.
  virtual void forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q, const kernels::Bf16* k,
                       const kernels::Bf16* v) = 0;
  /// dq, dk, dv (written) from dout, the gradient of out, and the forward's
  /// inputs and stored outputs.
  virtual void backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv, const kernels::Bf16* dout,
                        const kernels::Bf16* q, const kernels::Bf16* k, const kernels::Bf16* v,
                        const kernels::Bf16* out, const float* lse) = 0;
};

}  // namespace sextant::engine::transformer
