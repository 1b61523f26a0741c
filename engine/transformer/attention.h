// The self-attention block of each layer, Megatron-Core's SelfAttention:
// norm1, the fused QKV projection (column-parallel: heads and query groups
// divided by tp), rotary embeddings for RoPE models (Su et al. 2021), the
// attention core (attention_core.h: flash attention, or another core beside
// it), and the output projection (row-parallel) back into the residual
// stream, with the residual add riding on its GEMM.
//
// Stored per layer for the backward (with the norm's output and statistics,
// residual_block.h): Q, K, V as the core reads them — column slices of the
// fused projection's output when the head dimension is the kernels' own,
// otherwise padded arrays of their own (padded_heads.h) — and the core's
// output and log-sum-exp. Q and K are stored rotated.
#pragma once

#include <memory>
#include <vector>

#include "engine/tensor_parallel/parallel_linear.h"
#include "engine/transformer/attention_core.h"
#include "engine/transformer/residual_block.h"

namespace sextant::engine::transformer {

/// The attention core for `context`'s shape: with cp > 1, context-parallel
/// attention as its cp_comm_type says — the K/V ring (p2p,
/// context_parallel_ring_attention_core.h) or the all-gather
/// (context_parallel_attention_core.h) — else flash attention on this rank's
/// whole sequences (flash_attention_core.h). Touches no GPU.
std::unique_ptr<AttentionCore> make_attention_core(ModelContext& context);

class SelfAttention : public ResidualBlock {
 public:
  SelfAttention(ModelContext& context, ResidualStream& stream, Norm& norm);

  /// The gradients of Q, K, V and the core's output, and the padded heads' copies.
  void reserve_pass(BufferReserver& r) override;
  /// The core's buffers.
  void reserve_workspace(BufferReserver& r) override { core_->reserve(r); }
  void bind(bool full_recompute) override;

  void forward(int layer, bool recompute) override;
  void backward(int layer) override;

 protected:
  Ends ends(int layer) const override;
  void reserve_stored(int layer, BufferReserver& r) override;
  bool recompute_writes_output() const override { return true; }

 private:
  struct Stored {
    Bf16* qkv = nullptr;  // (T, qkv_width), the fused output; unused with padded heads
    Bf16* q = nullptr;    // (T, heads, attention_head_dim): slices of qkv, or padded arrays
    Bf16* k = nullptr;    // (T, kv_heads, attention_head_dim)
    Bf16* v = nullptr;
    Bf16* attn = nullptr;  // (T, heads, attention_head_dim), the core's output
    float* lse = nullptr;  // micro_batch·heads·seq floats, in the core's layout (attention_core.h)
  };
  /// The core's output as the projection reads it, (T, q_width): a.attn
  /// itself, or its unpadded copy.
  const Bf16* projection_input(const Stored& a);

  std::vector<Stored> stored_;  // per layer
  tensor_parallel::ColumnParallelLinear qkv_linear_;
  tensor_parallel::RowParallelLinear proj_linear_;
  std::unique_ptr<AttentionCore> core_;
  // One pass's, shared by every layer.
  Bf16* dattn_ = nullptr;         // (T, q_width)
  Bf16* qkv_ = nullptr;           // (T, qkv_width): the QKV GEMM's output gradient (and, with padded
                                  // heads, the output itself before the split)
  Bf16* dq_ = nullptr;            // (T, heads, attention_head_dim), padded heads only
  Bf16* dk_ = nullptr;            // (T, kv_heads, attention_head_dim), padded heads only
  Bf16* dv_ = nullptr;
  Bf16* attn_flat_ = nullptr;     // (T, q_width): the unpadded core output (padded heads only)
  Bf16* dattn_padded_ = nullptr;  // (T, heads, attention_head_dim) (padded heads only)
};

}  // namespace sextant::engine::transformer
