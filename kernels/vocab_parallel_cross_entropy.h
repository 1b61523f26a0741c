// Softmax cross entropy over a vocabulary split across the ranks of a
// tensor-parallel group (Shoeybi et al. 2019, Sec. 3: "we fuse the output of
// the parallel GEMM [Y1, Y2] with the cross entropy loss, which reduces the
// dimension to b x s"; Megatron's vocab_parallel_cross_entropy). Rank r holds
// the logits of vocabulary rows [vocab_start, vocab_start + vocab) for every
// token; the full rows are never gathered. Three kernels around two
// collectives the caller runs:
//
//   1. vocab_parallel_row_max: each row's local maximum            (rows) fp32
//      -> all-gather over the group: (tp, rows)
//   2. vocab_parallel_partials: the global maximum m of each row (from the
//      gathered maxima), and [sum_j exp(x_j - m) | x_target] over the local
//      columns (the target logit only where this rank owns the target, else 0)
//      -> all-reduce (sum) of the (2, rows) partials
//   3. vocab_parallel_loss_and_gradient: loss = log(S) + m - x_target, and the
//      local columns' gradient (exp(x - m) / S - onehot) * grad_scale.
//
// The max travels by all-gather rather than a max all-reduce because the
// engine's communicators reduce by sum only; the gathered maxima are tp
// floats per row. Every rank ends with the same per-row losses.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// row_max[r] = max over the row's `vocab` local logits.   logits: (rows, vocab) bf16.
void vocab_parallel_row_max(float* row_max, const Bf16* logits, int rows, int vocab,
                            cudaStream_t stream);

/// gathered_max: (ranks, rows), every rank's row_max. Writes max[r] = the
/// global maximum and partials = [sum_exp (rows) | target_logit (rows)]: this
/// rank's shares, to be summed over the group. A target outside
/// [vocab_start, vocab_start + vocab), or negative (an ignored row), adds 0.
void vocab_parallel_partials(float* partials, float* max, const float* gathered_max, int ranks,
                             const Bf16* logits, const std::int32_t* targets, int rows, int vocab,
                             int vocab_start, cudaStream_t stream);

/// From the summed partials: losses[r] = log(sum_exp) + max - target_logit
/// (0 for a negative target) and dlogits (may alias logits) = (softmax -
/// onehot) * grad_scale over the local columns (0 for a negative target).
void vocab_parallel_loss_and_gradient(float* losses, Bf16* dlogits, const Bf16* logits,
                                      const float* partials, const float* max,
                                      const std::int32_t* targets, int rows, int vocab,
                                      int vocab_start, float grad_scale, cudaStream_t stream);

}  // namespace sextant::kernels
