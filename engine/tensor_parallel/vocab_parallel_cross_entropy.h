// The cross entropy over logits split by vocabulary columns over the tp
// group (Shoeybi et al. 2019, Sec. 3; Megatron-Core
// tensor_parallel/cross_entropy.py): each rank holds its vocabulary rows'
// logits; the row maxima travel by all-gather, the sums of exponentials and
// the target logits by one all-reduce (kernels/vocab_parallel_cross_entropy.h),
// so no rank gathers the (T, vocab) logits. Every rank ends with the same
// per-token losses and the gradient of its own logit columns.
#pragma once

#include <cstdint>

#include "engine/tensor_parallel/collectives.h"
#include "kernels/bf16.h"

namespace sextant::engine::tensor_parallel {

class VocabParallelCrossEntropy {
 public:
  /// One micro-batch's, for T rows of a group of tp ranks; placed by the model.
  struct Buffers {
    float* row_max_local = nullptr;     // (T)
    float* row_max_gathered = nullptr;  // (tp, T)
    float* row_max = nullptr;           // (T)
    float* partials = nullptr;          // (2, T): sums of exponentials, target logits
  };
  Buffers buffers;

  /// losses (rows, written) and, in place of `logits` (rows, vocab: this
  /// rank's columns, from vocabulary row vocab_start), their gradient scaled by
  /// `loss_scale`. A negative target marks an ignored row.
  void forward(float* losses, kernels::Bf16* logits, const std::int32_t* targets, int rows, int vocab,
               int vocab_start, float loss_scale, Collectives& group);
};

}  // namespace sextant::engine::tensor_parallel
