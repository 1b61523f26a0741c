// The output layer, Megatron-Core GPTModel's final norm, output_layer and
// loss: the final norm of the last layer's output, the logits (T, vocab) =
// norm · lm_headᵀ (lm_head is wte when the embeddings are tied), and the
// softmax cross entropy against the targets, which writes the per-token losses
// and, in place of the logits, their gradient.
//
// Under tensor parallelism the LM head is column-parallel over the
// vocabulary (each rank holds vocab/tp rows: its logit columns), the cross
// entropy vocabulary-parallel (tensor_parallel/vocab_parallel_cross_entropy.h),
// and the LM head's input gradient each rank's share, summed over the group
// (all-reduced, or under sequence parallelism reduce-scattered onto the
// rank's tokens, its input having been all-gathered for all of them). The
// collectives run inside the output task.
#pragma once

#include <cstdint>

#include "engine/tensor_parallel/parallel_linear.h"
#include "engine/tensor_parallel/vocab_parallel_cross_entropy.h"
#include "engine/transformer/arena_buffers.h"
#include "engine/transformer/model_context.h"
#include "engine/transformer/norm.h"
#include "engine/transformer/residual_stream.h"

namespace sextant::engine::transformer {

class OutputLayer {
 public:
  OutputLayer(ModelContext& context, ResidualStream& stream, Norm& norm);

  /// What a micro-batch stores: the final norm's output (for all T tokens:
  /// under sequence parallelism all-gathered) and statistics, and the logits.
  void reserve_stored(BufferReserver& r);
  /// The vocabulary-parallel cross entropy's buffers (tp > 1).
  void reserve_cross_entropy(BufferReserver& r);
  /// The step's targets and per-token losses: `microbatches` micro-batches of T.
  void reserve_targets(int microbatches, BufferReserver& r);

  /// Micro-batch `mb`'s losses, and the logits' gradient scaled by `loss_scale`
  /// (1 / tokens of the global batch, for a mean over the step).
  void forward(int mb, float loss_scale);
  /// The residual stream's gradient, written: the backward's start.
  void backward();

  std::int32_t* targets() const { return targets_; }
  float* losses() const { return losses_; }

 private:
  ModelContext& context_;
  ResidualStream& stream_;
  Norm& norm_;
  tensor_parallel::Linear lm_head_;
  tensor_parallel::VocabParallelCrossEntropy cross_entropy_;
  NormActivations final_norm_;  // out: (T, h)
  Bf16* logits_ = nullptr;      // (T, vocab); the cross entropy writes its gradient in place
  std::int32_t* targets_ = nullptr;
  float* losses_ = nullptr;
};

}  // namespace sextant::engine::transformer
