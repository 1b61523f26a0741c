// Sequence parallelism's exchanges around a transformer block (Korthikanti et
// al. 2022, Sec. 4.2.2): the residual stream and the norms live on T/tp tokens
// per rank; the block's column-parallel linear (QKV, fc1) reads the norm's
// output all-gathered over the tp group, and its row-parallel linear (proj,
// fc2) leaves partial sums that are reduce-scattered back onto each rank's
// tokens. The backward mirrors them: the residual stream's gradient
// all-gathered for the row-parallel input gradient, the norm's output gathered
// again for the column-parallel weight gradient (it is stored sharded, as
// Megatron re-gathers it), the column-parallel input gradient reduce-scattered.
//
// The Plan runs these collectives as tasks of their own around the block's
// compute task (sim/plan: kTensorParallelGather before it, ...Scatter after
// it). What a collective task leaves in flight for the block's GEMMs, or the
// GEMMs leave for the next collective task, is this object's state:
//  - tp_comm_overlap (Megatron --tp-comm-overlap): the forward's all-gather and
//    the backward's gradient all-gather travel in tp chunks that the GEMMs take
//    as they arrive, and the forward's reduce-scatter goes chunk by chunk as
//    the GEMM computes them (chunked_collectives.h, overlap_schedule.h);
//  - always under sp, the backward's bulk overlaps (Megatron's
//    LinearWithGradAccumulationAndAsyncCommunication; with --tp-comm-overlap,
//    Transformer Engine's BULK_OVERLAP_AG and BULK_OVERLAP_RS): the norm's
//    all-gather runs while the block's other GEMMs do, and the input
//    gradient's reduce-scatter while the weight gradient computes.
// The same collectives on the same data as without the overlaps, bit for bit.
// The GEMMs that consume them are parallel_linear.h's.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/tensor_parallel/chunked_collectives.h"
#include "engine/tensor_parallel/collectives.h"
#include "kernels/bf16.h"

namespace sextant::engine::tensor_parallel {

class SequenceParallel {
 public:
  /// One micro-batch's buffers (T tokens, hidden h); the model places them in
  /// its arena before bind().
  struct Buffers {
    kernels::Bf16* gathered_input = nullptr;     // (T, h): a norm's output, all-gathered
    kernels::Bf16* norm_shard = nullptr;         // (T/tp, h): the final norm's output on this rank's
                                                 // tokens, before the output layer all-gathers it
    kernels::Bf16* gathered_gradient = nullptr;  // (T, h): the residual stream's gradient, all-gathered
    kernels::Bf16* gradient_shard = nullptr;     // (T/tp, h): a reduce-scattered input gradient
    kernels::Bf16* staging = nullptr;            // (T, h), tp_comm_overlap only: the other ranks'
                                                 // partial sums of this rank's chunk, block j from rank j
  };
  Buffers buffers;

  /// `shard_elements`: one rank's tokens of a (T, h) activation, (T/tp)·h.
  explicit SequenceParallel(std::size_t shard_elements) : shard_elements_(shard_elements) {}

  /// `overlap`: tp_comm_overlap's chunked collectives. Needs a CUDA device (events).
  void bind(Collectives& group, bool overlap);

  std::size_t shard_elements() const { return shard_elements_; }
  Collectives& group() const { return *group_; }
  /// Whether the forward and backward all-gathers and the forward's
  /// reduce-scatter go in chunks (tp_comm_overlap).
  bool chunked() const { return chunked_ != nullptr; }
  int chunks() const { return group_->size(); }

  // ---- Forward ----
  /// The all-gather task: `shard` (a norm's output) into buffers.gathered_input,
  /// whole, or chunked and left travelling for the column-parallel GEMM.
  void gather_input(const kernels::Bf16* shard);
  /// true once after a chunked gather_input or gather_output_gradient: the
  /// GEMM that reads it then takes its chunks with wait_chunk(0 .. chunks()−1).
  bool take_input_chunks();
  bool take_gradient_chunks();
  /// Makes the compute stream wait for ring step `step`'s chunk; returns its index.
  int wait_chunk(int step) { return chunked_->wait_gathered(step); }
  /// Chunked only: the row-parallel GEMM computed chunk `chunk`'s rows of
  /// `partials` (T, h): off to their owner while the next chunk computes.
  void send_partial_chunk(int chunk, const kernels::Bf16* partials);
  /// The reduce-scatter task: `shard` (T/tp, h) = the sum over the group of
  /// this rank's rows of `partials` (T, h).
  void scatter_output(const kernels::Bf16* partials, kernels::Bf16* shard);

  // ---- Backward ----
  /// The all-gather task: `shard` (the residual stream's gradient) into
  /// buffers.gathered_gradient, whole or chunked (take_gradient_chunks).
  void gather_output_gradient(const kernels::Bf16* shard);
  /// The same task: `shard` (the norm's stored output) into
  /// buffers.gathered_input, running while the block's GEMMs do.
  void start_input_gather(const kernels::Bf16* shard);
  bool input_gather_pending() const { return input_gather_->pending(); }
  /// The compute stream waits for start_input_gather's collective.
  void wait_input_gathered() { input_gather_->wait(group_->compute_stream()); }
  /// The column-parallel input gradient `full` (T, h) reduce-scattered into
  /// buffers.gradient_shard while the weight gradient computes.
  void start_input_gradient_scatter(const kernels::Bf16* full);
  /// The reduce-scatter task: buffers.gradient_shard from `full` — waiting
  /// for start_input_gradient_scatter's collective, or running it now.
  void finish_input_gradient_scatter(const kernels::Bf16* full);

 private:
  std::size_t shard_elements_;
  Collectives* group_ = nullptr;
  std::unique_ptr<ChunkedCollectives> chunked_;  // tp_comm_overlap only
  bool input_chunks_ = false;     // gathered_input's chunks on their way (forward)
  bool partial_chunks_ = false;   // the partial sums' chunks sent to their owners (forward)
  bool gradient_chunks_ = false;  // gathered_gradient's chunks on their way (backward)
  std::unique_ptr<PendingCollective> input_gather_;            // backward: gathered_input
  std::unique_ptr<PendingCollective> input_gradient_scatter_;  // backward: gradient_shard
};

}  // namespace sextant::engine::tensor_parallel
