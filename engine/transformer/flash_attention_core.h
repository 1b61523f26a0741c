// The attention core on this rank's whole sequences: flash attention
// (kernels/flash_attention.h; Dao 2023), the (s, s) scores never stored, so
// the backward recomputes them from the stored output and log-sum-exp and
// selective recomputation stores nothing more (Korthikanti et al. 2022, Sec. 4).
#pragma once

#include <cstddef>

#include "engine/transformer/attention_core.h"
#include "engine/transformer/model_context.h"
#include "kernels/flash_attention.h"

namespace sextant::engine::transformer {

/// The flash attention call on this rank's whole sequences of `shape`: its
/// micro-batch of seq tokens, its heads, and the row strides of Q, K and V as
/// the block stores them (attention.h: column slices of the fused QKV rows,
/// or padded arrays of their own). The context-parallel core runs its chunks
/// with these heads and strides.
kernels::FlashAttentionShape flash_attention_shape(const TransformerShape& shape);

class FlashAttentionCore : public AttentionCore {
 public:
  explicit FlashAttentionCore(ModelContext& context);

  /// The backward's workspace: "workspace.attention".
  void reserve(BufferReserver& r) override;
  void forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q, const kernels::Bf16* k,
               const kernels::Bf16* v) override;
  void backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv, const kernels::Bf16* dout,
                const kernels::Bf16* q, const kernels::Bf16* k, const kernels::Bf16* v, const kernels::Bf16* out,
                const float* lse) override;

 private:
  ModelContext& context_;
  kernels::FlashAttentionShape shape_;
  char* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace sextant::engine::transformer
