// Filling parameter tensors on the device: deterministic normal initialisation
// from a seed, constants, and the fp32 master -> bf16 model weight cast.
//
// The normal values come from a counter-based generator: element i of the
// tensor with id `stream` is a pure function of (seed, stream, i) (SplitMix64
// finaliser, Steele et al. 2014, then Box-Muller, Box & Muller 1958), so the
// same seed gives the same weights on every GPU, launch shape and run, and one
// tensor's values do not depend on the others'.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// out[i] = mean + stddev * N(0, 1)_(seed, stream, i), i < n; out: (n) fp32.
void fill_normal(float* out, std::size_t n, float mean, float stddev, std::uint64_t seed,
                 std::uint64_t stream_id, cudaStream_t stream);

/// A block of a whole (·, whole_cols) row-major tensor drawn as fill_normal
/// draws the whole tensor: out[i·out_ld + j] = mean + stddev · N(0, 1)_(seed,
/// stream, (row0 + i)·whole_cols + col0 + j) for i < rows, j < cols. So a
/// tensor-parallel shard (blocks of rows or columns) gets exactly the values
/// the whole tensor has there, whatever the layout. out: (rows, out_ld) fp32.
void fill_normal_block(float* out, std::size_t out_ld, std::size_t rows, std::size_t cols, std::size_t whole_cols,
                       std::size_t row0, std::size_t col0, float mean, float stddev, std::uint64_t seed,
                       std::uint64_t stream_id, cudaStream_t stream);

/// out[i] = value, i < n; out: (n) fp32.
void fill_constant(float* out, std::size_t n, float value, cudaStream_t stream);

/// out[i] = bf16(in[i]) rounded to nearest even, i < n.
void convert_to_bf16(Bf16* out, const float* in, std::size_t n, cudaStream_t stream);

/// The normal deviate fill_normal uses for element `index`, computed on the host
/// (equal to the device's up to one float ulp), so tests and CPU code can
/// reproduce a tensor.
float standard_normal_at(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t index);

}  // namespace sextant::kernels
