// Expert parallelism's reordering of received rows (Megatron-Core's
// sort_chunks_by_idxs in moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher):
// after the all-to-all, a rank holds its local experts' rows grouped by the
// rank that sent them ("source-major": source 0's rows for local expert 0,
// then for expert 1, ..., then source 1's); the grouped GEMMs need each
// expert's rows together ("expert-major": expert 0's rows from source 0,
// source 1, ..., then expert 1's). The combine goes back the other way.
//
// counts (sources, experts) int32 on the device, row-major: counts[s·experts + e]
// rows of the chunk (s, e). Rows keep their order inside a chunk. Rows of
// `cols` bf16 moved as 16-byte vectors: cols % 8 == 0, pointers 16-byte aligned.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

enum class MoeChunkOrder {
  kSourceMajor,  // (s, e) chunks in the order s, then e
  kExpertMajor,  // in the order e, then s
};

/// Chunks (sources x experts) at most: each block scans the counts in shared memory.
inline constexpr int kMoeChunkSortMaxChunks = 4096;

/// out (rows, cols) = in's rows, `in_order` rearranged to the other order.
/// rows: the sum of counts (the host knows it: the grouped GEMMs take the counts
/// too); counts must be >= 0 and sum to it. Throws KernelArgumentError for
/// sources x experts above kMoeChunkSortMaxChunks or an unaligned width.
void moe_sort_chunks(Bf16* out, const Bf16* in, const std::int32_t* counts, int sources, int experts,
                     std::int64_t rows, int cols, MoeChunkOrder in_order, cudaStream_t stream);

}  // namespace sextant::kernels
