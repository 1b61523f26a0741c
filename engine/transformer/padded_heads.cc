#include "engine/transformer/padded_heads.h"

#include <cmath>

#include "kernels/head_copy.h"

namespace sextant::engine::transformer {
namespace {

// sqrt(padded / head_dim): scaling Q by it turns the kernel's 1/sqrt(padded)
// softmax scale into the model's 1/sqrt(head_dim) (kernels/head_copy.h).
float padded_query_scale(const TransformerShape& s) {
  return static_cast<float>(std::sqrt(static_cast<double>(s.attention_head_dim()) / s.head_dim));
}

}  // namespace

void split_padded_heads(kernels::Bf16* q, kernels::Bf16* k, kernels::Bf16* v, const kernels::Bf16* qkv,
                        const TransformerShape& s, cudaStream_t stream) {
  const int pd = s.attention_head_dim();
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.src_row = s.qkv_width();
  c.src_head = s.head_dim;
  c.dst_head = pd;
  c.copy_width = s.head_dim;
  c.dst_width = pd;
  c.heads = s.heads;
  c.dst_row = s.heads * pd;
  c.scale = padded_query_scale(s);
  kernels::copy_heads(q, qkv, c, stream);
  c.heads = s.kv_heads;
  c.dst_row = s.kv_heads * pd;
  c.scale = 1.0f;
  kernels::copy_heads(k, qkv + s.q_width(), c, stream);
  kernels::copy_heads(v, qkv + s.q_width() + s.kv_width(), c, stream);
}

void merge_padded_gradients(kernels::Bf16* dqkv, const kernels::Bf16* dq, const kernels::Bf16* dk,
                            const kernels::Bf16* dv, const TransformerShape& s, cudaStream_t stream) {
  const int pd = s.attention_head_dim();
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.src_head = pd;
  c.dst_row = s.qkv_width();
  c.dst_head = s.head_dim;
  c.copy_width = s.head_dim;
  c.dst_width = s.head_dim;
  c.heads = s.heads;
  c.src_row = s.heads * pd;
  c.scale = padded_query_scale(s);  // d(loss)/dq = scale * d(loss)/d(scaled q)
  kernels::copy_heads(dqkv, dq, c, stream);
  c.heads = s.kv_heads;
  c.src_row = s.kv_heads * pd;
  c.scale = 1.0f;
  kernels::copy_heads(dqkv + s.q_width(), dk, c, stream);
  kernels::copy_heads(dqkv + s.q_width() + s.kv_width(), dv, c, stream);
}

void unpad_heads(kernels::Bf16* flat, const kernels::Bf16* padded, const TransformerShape& s, cudaStream_t stream) {
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.heads = s.heads;
  c.src_row = s.heads * s.attention_head_dim();
  c.src_head = s.attention_head_dim();
  c.dst_row = s.q_width();
  c.dst_head = s.head_dim;
  c.copy_width = s.head_dim;
  c.dst_width = s.head_dim;
  kernels::copy_heads(flat, padded, c, stream);
}

void pad_heads(kernels::Bf16* padded, const kernels::Bf16* flat, const TransformerShape& s, cudaStream_t stream) {
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.heads = s.heads;
  c.src_row = s.q_width();
  c.src_head = s.head_dim;
  c.dst_row = s.heads * s.attention_head_dim();
  c.dst_head = s.attention_head_dim();
  c.copy_width = s.head_dim;
  c.dst_width = s.attention_head_dim();
  kernels::copy_heads(padded, flat, c, stream);
}

}  // namespace sextant::engine::transformer
