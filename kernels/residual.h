// Residual connection: out = a + b, elementwise in bf16 (sum in fp32, one rounding).
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// out, a, b: (n) bf16; out may alias a or b. Requires n % 8 == 0 and 16-byte
/// aligned pointers (activations of a hidden size that is a multiple of 8).
void residual_add(Bf16* out, const Bf16* a, const Bf16* b, std::size_t n, cudaStream_t stream);

/// out (rows, cols) = a + b + bias (cols, broadcast over the rows; may be
/// null), one rounding: a row-parallel layer's reduce-scattered output plus
/// the residual and the bias under sequence parallelism (Korthikanti et al.
/// 2022), where each rank adds them to its own rows after the reduction.
/// out may alias a or b. Requires cols % 8 == 0 and 16-byte aligned pointers.
void residual_bias_add(Bf16* out, const Bf16* a, const Bf16* b, const Bf16* bias, int rows, int cols,
                       cudaStream_t stream);

}  // namespace sextant::kernels
