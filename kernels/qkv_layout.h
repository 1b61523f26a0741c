// Between the fused QKV projection and the attention kernels: the QKV GEMM
// writes one (tokens, [Q heads | K heads | V heads]) row per token; flash
// attention reads Q, K and V as separate contiguous (tokens, heads, head_dim)
// arrays. qkv_split copies them apart and, for rotary models, rotates Q and K
// on the way (one pass over the data instead of two); qkv_merge_gradients is
// its backward: dQ and dK rotated back, and the three interleaved again.
//
// Rotary position embedding (Su et al. 2021, RoFormer, eq. 34) in the
// rotate-half form of GPT-NeoX, HF Llama and Megatron-LM: for position t and
// i < d/2, with angle = t * theta^(-2i/d),
//   out[i]       = x[i] cos(angle) - x[i + d/2] sin(angle)
//   out[i + d/2] = x[i + d/2] cos(angle) + x[i] sin(angle)
// The backward is the rotation by -angle (the rotation is orthogonal).
// Arithmetic in fp32, one bf16 rounding per output; V is copied bit for bit.
#pragma once

#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

struct QkvShape {
  int batch = 0;
  int seq = 0;       // positions restart at 0 for each of the batch's sequences
  int heads = 0;     // query heads
  int kv_heads = 0;  // key/value heads
  int head_dim = 0;  // even, and a multiple of 16 (two 8-element vectors per half)
  bool rotary = false;
  float rope_theta = 10000.0f;
};

/// Empty when the launchers accept `shape`; otherwise every reason, with values.
std::string qkv_shape_problem(const QkvShape& shape);

/// q: (batch*seq, heads, d), k and v: (batch*seq, kv_heads, d), written;
/// qkv: (batch*seq, (heads + 2 kv_heads) d). All 16-byte aligned.
void qkv_split(Bf16* q, Bf16* k, Bf16* v, const Bf16* qkv, const QkvShape& shape,
               cudaStream_t stream);

/// dqkv: (batch*seq, (heads + 2 kv_heads) d), written from dq, dk, dv (shapes as above).
void qkv_merge_gradients(Bf16* dqkv, const Bf16* dq, const Bf16* dk, const Bf16* dv,
                         const QkvShape& shape, cudaStream_t stream);

}  // namespace sextant::kernels
