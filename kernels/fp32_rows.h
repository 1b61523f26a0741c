// Row blocks moved between bf16 arrays and fp32 accumulators: a gradient
// summed over several kernel calls (context parallelism's ring: a query
// chunk's dQ over every step, a key chunk's dK and dV over every rank that
// saw it) is accumulated in fp32 and rounded to bf16 once, as Megatron-Core
// accumulates gradients (main_grad in fp32; Narayanan et al. 2021, Sec. 4.2
// and the mixed-precision recipe of Micikevicius et al. 2018, Sec. 3.1).
// Rows are `width` elements; consecutive rows are `*_row_stride` elements
// apart (a stride equal to width is contiguous; a larger one a column slice
// of a fused buffer, e.g. dK of the (tokens, qkv) gradient).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

struct RowBlock {
  long long rows = 0;
  int width = 0;            // elements per row
  long long dst_row_stride = 0;  // 0 means width
  long long src_row_stride = 0;  // 0 means width
};

/// Empty when the kernels below accept `b` (rows and width positive, strides
/// 0 or at least width); else every reason, with the values.
std::string row_block_problem(const RowBlock& b);

/// dst[r, c] (fp32) += src[r, c] (bf16), or = when `overwrite`.
void accumulate_bf16_rows(float* dst, const Bf16* src, const RowBlock& b, bool overwrite, cudaStream_t stream);
/// dst[r, c] (bf16) = src[r, c] (fp32) rounded to nearest even; only the
/// `width` columns of each dst row are written.
void store_bf16_rows(Bf16* dst, const float* src, const RowBlock& b, cudaStream_t stream);

}  // namespace sextant::kernels
