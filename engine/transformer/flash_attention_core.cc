#include "engine/transformer/flash_attention_core.h"

namespace sextant::engine::transformer {

kernels::FlashAttentionShape flash_attention_shape(const TransformerShape& s) {
  kernels::FlashAttentionShape a{};
  a.batch = s.micro_batch;
  a.seq = s.seq;
  a.heads = s.heads;
  a.kv_heads = s.kv_heads;
  a.head_dim = s.attention_head_dim();
  if (!s.attention_padded()) {  // slices of the fused QKV rows
    a.q_row_stride = s.qkv_width();
    a.kv_row_stride = s.qkv_width();
  }
  return a;
}

FlashAttentionCore::FlashAttentionCore(ModelContext& context)
    : context_(context), shape_(flash_attention_shape(context.shape())) {}

void FlashAttentionCore::reserve(BufferReserver& r) {
  workspace_bytes_ = kernels::flash_attention_backward_workspace_bytes(shape_);
  r.shared(workspace_, "workspace.attention", MemoryCategory::kOther, workspace_bytes_);
}

void FlashAttentionCore::forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q, const kernels::Bf16* k,
                                 const kernels::Bf16* v) {
  kernels::flash_attention_forward(out, lse, q, k, v, shape_, context_.stream());
}

void FlashAttentionCore::backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv,
                                  const kernels::Bf16* dout, const kernels::Bf16* q, const kernels::Bf16* k,
                                  const kernels::Bf16* v, const kernels::Bf16* out, const float* lse) {
  kernels::flash_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape_, workspace_, workspace_bytes_,
                                    context_.stream());
}

}  // namespace sextant::engine::transformer
