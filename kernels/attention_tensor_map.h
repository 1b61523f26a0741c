// The TMA tensor map of an attention operand, shared by the Hopper forward and
// backward (kernels/flash_attention_sm90.cu, flash_attention_backward_sm90.cu).
//
// An operand is (batch, seq, heads, head_dim) bf16 with `row_stride` elements
// between consecutive tokens (Q, K, V may be column slices of the fused QKV
// rows): element i of head h of token t of sequence b is at
// base[(b * seq + t) * row_stride + h * head_dim + i]. TMA sees it as the 4-D
// tensor (head_dim, heads, seq, batch), so a box never crosses into the next
// sequence and rows past seq are zero-filled; boxes are (64, 1, box_rows, 1)
// with the 128-byte swizzle (64 bf16 = one swizzle row; kernels/wgmma.cuh).
//
// cuTensorMapEncodeTiled is a driver function: it is looked up once through
// the runtime's cudaGetDriverEntryPointByVersion, so the library does not link
// libcuda (NVIDIA CUDA Programming Guide, "Driver Entry Point Access").
#pragma once

#include <cuda.h>

#include "kernels/bf16.h"

namespace sextant::kernels::detail {

/// Columns of one box: 64 bf16, the 128-byte swizzle's row.
inline constexpr int kTensorMapBoxCols = 64;

/// Throws CudaError when the driver lacks cuTensorMapEncodeTiled or refuses the shape.
CUtensorMap make_attention_tensor_map(const Bf16* base, int head_dim, int heads, int seq, int batch,
                                      long long row_stride, int box_rows);

}  // namespace sextant::kernels::detail
