// Rotary position embedding (Su et al. 2021, "RoFormer", eq. 34) in the
// rotate-half form of GPT-NeoX, HF Llama and Megatron-LM, applied in place to
// the fused QKV projection's output. For the token at position t of its
// sequence (0-based; under context parallelism its position in the whole
// sequence: kernels/sequence_positions.h), every query and key head, and i < d/2:
//   angle          = t * theta^(-2i/d)
//   out[i]         = x[i] cos(angle) - x[i + d/2] sin(angle)
//   out[i + d/2]   = x[i + d/2] cos(angle) + x[i] sin(angle)
// The rotation is orthogonal, so the backward pass is the same rotation by
// -angle. V heads are left alone.
//
// Arithmetic in fp32 with one bf16 rounding per output. The angle is formed in
// fp32 as Megatron and HF form it (t * inv_freq, both fp32) and its sine and
// cosine come from sincosf, which keeps full accuracy at the angles of long
// sequences (up to t = 8191 rad and beyond), where __sincosf would not.

#pragma once

#include <string>

#include "kernels/bf16.h"
#include "kernels/sequence_positions.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// The fused QKV buffer one call rotates: (batch * seq, row_stride) bf16,
/// row-major, token b * seq + t in row b * seq + t. Each row holds the query
/// heads at columns [0, heads * head_dim), the key heads at
/// [heads * head_dim, (heads + kv_heads) * head_dim) and the value heads after
/// them; columns past (heads + 2 * kv_heads) * head_dim, if any, are left alone.
struct RopeShape {
  int batch = 0;
  int seq = 0;         // local tokens per sequence; positions restart for each of the batch's sequences
  int heads = 0;       // query heads
  int kv_heads = 0;    // key/value heads (== heads for MHA, fewer for GQA)
  int head_dim = 0;    // even, at most 256
  int row_stride = 0;  // elements per row: >= (heads + 2 * kv_heads) * head_dim, a multiple of 8
  float theta = 10000.0f;  // the base; RoFormer and Llama 2 use 10^4, Llama 3 5 * 10^5
  /// Each local token's position in the whole sequence: t by default; under
  /// context parallelism the rank's two chunks' positions.
  SequencePositions positions;
};

/// Empty when rope_forward and rope_backward accept `shape`; otherwise every
/// reason they do not, with the values ("head_dim (7) must be even and in
/// [2, 256]; ...").
std::string rope_unsupported_reason(const RopeShape& shape);

/// Rotates the query and key heads of `qkv` (batch * seq, row_stride) bf16 in
/// place by their positions' angles; value heads untouched.
/// Throws KernelArgumentError (before launching anything) when the shape is
/// unsupported, qkv is null, or qkv is not 16-byte aligned.
void rope_forward(Bf16* qkv, const RopeShape& shape, cudaStream_t stream);

/// The backward of rope_forward: rotates the query and key gradients of
/// `dqkv` (batch * seq, row_stride) bf16 in place by -angle (dL/dx = R^T dL/dy
/// = R(-angle) dL/dy); the value gradients untouched. Throws as rope_forward.
void rope_backward(Bf16* dqkv, const RopeShape& shape, cudaStream_t stream);

}  // namespace sextant::kernels
