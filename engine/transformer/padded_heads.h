// Heads of a dimension the attention kernels do not take natively (64 and
// 128) run zero-padded to 128 (kernels/head_copy.h; GPT-3 2.7B's 80): the
// fused QKV projection's rows are split into padded Q, K, V arrays on the
// way in, the attention output unpadded for the projection on the way out,
// and the gradients copied back the same ways. Q is scaled by
// sqrt(padded / head_dim) so that the kernel's 1/sqrt(padded) softmax scale is
// the model's 1/sqrt(head_dim).
#pragma once

#include "engine/model/transformer_shape.h"
#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::engine::transformer {

/// q (T, heads, padded), k and v (T, kv_heads, padded) from the fused rows qkv (T, qkv_width).
void split_padded_heads(kernels::Bf16* q, kernels::Bf16* k, kernels::Bf16* v, const kernels::Bf16* qkv,
                        const TransformerShape& s, cudaStream_t stream);
/// The fused rows' gradient dqkv (T, qkv_width) from the padded dq, dk, dv.
void merge_padded_gradients(kernels::Bf16* dqkv, const kernels::Bf16* dq, const kernels::Bf16* dk,
                            const kernels::Bf16* dv, const TransformerShape& s, cudaStream_t stream);
/// flat (T, q_width) from padded (T, heads, padded): the attention output as the projection reads it.
void unpad_heads(kernels::Bf16* flat, const kernels::Bf16* padded, const TransformerShape& s, cudaStream_t stream);
/// padded (T, heads, padded) from flat (T, q_width): the output's gradient as the kernel reads it.
void pad_heads(kernels::Bf16* padded, const kernels::Bf16* flat, const TransformerShape& s, cudaStream_t stream);

}  // namespace sextant::engine::transformer
