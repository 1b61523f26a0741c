// Partial attention results merged by their log-sum-exps: ring attention
// (Liu et al. 2023, "Ring Attention with Blockwise Transformers", Sec. 3;
// the merge is the online softmax of Milakov & Gimelshein 2018, Eq. 3-4, and
// FlashAttention-2's rescaling, Dao 2023, Sec. 3.1.1). When the same queries
// attend two disjoint key sets A and B, with outputs O_A, O_B and
// log-sum-exps L_A, L_B of their scaled scores, the attention over A u B is
//   L = log(exp(L_A) + exp(L_B)) = max + log(exp(L_A - max) + exp(L_B - max)),
//   O = exp(L_A - L) O_A + exp(L_B - L) O_B.
// Context parallelism's ring accumulates every step's partial result into
// fp32 (the output and the LSE), and rounds the output once to bf16.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// `rows` query tokens of `heads` heads of `head_dim` elements:
/// outputs (rows, heads, head_dim) row-major and contiguous; LSE (heads, rows),
/// flash_attention_forward's layout for one sequence (FlashAttentionShape, batch 1).
struct AttentionMergeShape {
  int rows = 0;
  int heads = 0;
  int head_dim = 0;
};

/// Empty when merge_attention_partial accepts `shape` (every count positive,
/// head_dim at most 1024 and a multiple of 8); else every reason, with the values.
std::string attention_merge_problem(const AttentionMergeShape& shape);

/// Merges the partial result (part_out bf16, part_lse) into the accumulated
/// one (out_acc fp32, lse_acc), in place. `first`: there is no accumulated
/// result yet — out_acc and lse_acc are written from the partial alone (their
/// old contents are ignored). A row whose two LSEs are both -inf (no key seen)
/// keeps out 0 and LSE -inf.
/// Throws KernelArgumentError before launching when attention_merge_problem is
/// not empty or a pointer is null.
void merge_attention_partial(float* out_acc, float* lse_acc, const Bf16* part_out, const float* part_lse,
                             const AttentionMergeShape& shape, bool first, cudaStream_t stream);

}  // namespace sextant::kernels
