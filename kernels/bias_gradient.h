// The bias gradient of a linear layer y = x W^T + b: db = the column sums of
// dy over the rows (tokens), in fp32, deterministic (column_partials.h: one
// partial sum per chunk of 64 rows, then the chunks added in order).
//
// A GEMV (ones^T dy on cuBLASLt) does the same sum, and the engine used one;
// this reads dy with all of a chunk's rows in flight at once. In the GPT-1.3B
// step on an H100 it averaged 46 us a call against the GEMVs' 53 (qkv) and 42
// (fc1): about even in sum (reports/measurements/2026-11-22-h100-engine-session4).
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// Device workspace bias_gradient needs: ceil(rows / 64) x cols fp32.
std::size_t bias_gradient_workspace_bytes(int rows, int cols);

/// dbias (+)= column sums of dout   dout: (rows, cols) bf16; dbias: (cols) fp32,
/// added to when `accumulate`, else written. Requires cols % 8 == 0 and 16-byte
/// aligned dout and workspace.
void bias_gradient(float* dbias, const Bf16* dout, int rows, int cols, bool accumulate, void* workspace,
                   std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace sextant::kernels
