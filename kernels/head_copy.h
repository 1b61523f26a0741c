// Copies attention heads between the layouts the GEMMs and the attention
// kernels use, 16 bytes at a time:
//  - the fused QKV projection writes one row per token, [Q heads | K heads |
//    V heads]; flash attention reads Q, K and V as separate contiguous
//    (tokens, heads, head_dim) arrays, and writes dQ, dK, dV that way;
//  - flash attention takes head dimensions 64 and 128 only; a model whose
//    head dimension is another multiple of 8 (GPT-3 2.7B: 80) runs it on
//    heads zero-padded to 128. Zeros add nothing to q.k or to P.V, and the
//    softmax scale 1/sqrt(128) becomes 1/sqrt(80) by scaling Q by
//    sqrt(128/80) on the way in (and dQ by the same factor on the way out).
//
// For every token t < tokens, head h < heads and element i < dst_width:
//   dst[t * dst_row + h * dst_head + i] = i < copy_width ? scale * src[t * src_row + h * src_head + i] : 0
// With scale == 1 the copy is bit-exact; otherwise one fp32 multiply and one bf16 rounding.
#pragma once

#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

struct HeadCopy {
  long long tokens = 0;
  int heads = 0;
  int src_row = 0;   // elements between consecutive tokens of src
  int src_head = 0;  // elements between consecutive heads of src
  int dst_row = 0;
  int dst_head = 0;
  int copy_width = 0;  // elements copied per head
  int dst_width = 0;   // elements written per head (>= copy_width; the rest are zeros)
  float scale = 1.0f;
};

/// Empty when copy_heads accepts `c`: every count positive, every stride and
/// width a multiple of 8 (16-byte vectors), heads not overlapping in dst.
std::string head_copy_problem(const HeadCopy& c);

/// Throws KernelArgumentError before launching when head_copy_problem is not
/// empty, a pointer is null or not 16-byte aligned. dst and src must not overlap.
void copy_heads(Bf16* dst, const Bf16* src, const HeadCopy& c, cudaStream_t stream);

}  // namespace sextant::kernels
