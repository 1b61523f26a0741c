// Between the fused QKV projection and the attention kernels: the QKV GEMM
// writes one (tokens, [Q heads | K heads | V heads]) row per token (rotated in
// place by rope.h for rotary models); flash attention reads Q, K and V as
// separate contiguous (tokens, heads, head_dim) arrays. qkv_split copies them
// apart; qkv_merge_gradients is its backward, interleaving dQ, dK and dV into
// one row per token for the QKV GEMM's backward. Bit-exact copies.
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
  int head_dim = 0;  // a multiple of 8 (16-byte vectors)
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
