// The distributed optimizer (ZeRO stage 1; Rajbhandari et al. 2020, Sec. 5.1;
// Megatron-Core's --use-distributed-optimizer): each of the dp ranks keeps the
// fp32 master weights and Adam moments of one block of every gradient bucket
// only — 12/dp bytes per parameter instead of 12 — updates that block from
// its reduce-scattered gradients, and the bf16 weights are all-gathered so
// every rank has the whole model for the next forward.
//
// Buffers: the bf16 weights and fp32 gradients are the flat full-length ones
// (engine/model/parameter_layout.h); the shard (master, m, v) holds rank r's
// block of bucket 0, then of bucket 1, ... back to back. Bucket b's block is
// [begin + r·elements/dp, +elements/dp) (GradientReducer::owned).
//
// Beside expert parallelism each bucket is sharded over its own group
// (Megatron-Core's distributed optimizer keeps the expert parameters' buffers
// apart and shards them over the expert-data-parallel group): the expert
// weights' buckets over the ep rank's expert-dp replicas, the rest over dp.
// A bucket whose group is null is this rank's whole (dp = ep: each expert on
// one rank only): updated here, gathered by no one.
//
// The gradient norm for clipping is the global one: each rank sums the
// squares of its blocks, and the sums are all-reduced over the group (and over
// tp and pp beside them: count_in_norm). With expert buckets the sum is still
// over dp alone: each expert element lies in exactly one block of one rank of
// its ep rank's expert-dp group, each other element in one block of one dp
// rank, so the dp group's blocks tile every rank's experts and the rest once. Weight decay applies to the decayed
// ranges only (the layout's decayed tensors; one range per pipeline chunk), so
// a block crossing a range's edge is updated in parts.
//
// Not thread-safe; one per rank.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/model/gradient_bucket_plan.h"
#include "kernels/adamw.h"
#include "engine/data_parallel/optimizer_buffers.h"
#include "kernels/bf16.h"

struct CUevent_st;

namespace sextant::engine::data_parallel {

class DistributedOptimizer {
 public:
  /// The factor every bucket's size must be a multiple of for `dp` ranks
  /// (engine/model/gradient_bucket_plan.h).
  static std::size_t bucket_multiple(int dp) { return sharded_bucket_multiple(dp); }

  /// `buckets`: the reducer's, each a multiple of bucket_multiple(dp.size())
  /// (std::invalid_argument otherwise); `decayed`: sorted, disjoint ranges
  /// that take weight decay. `dp` should have a stream of its own.
  DistributedOptimizer(comm::Communicator& dp, std::vector<GradientBucket> buckets,
                       std::vector<ElementRange> decayed);
  /// Each bucket sharded over its own group, `over[i]` for buckets[i]
  /// (nullptr: held whole by this rank), each a multiple of
  /// bucket_multiple(its group's size); the norm summed over `dp`, whose
  /// ranks' blocks must tile the model once (see above). `over` has one entry
  /// per bucket (std::invalid_argument otherwise).
  DistributedOptimizer(comm::Communicator& dp, std::vector<GradientBucket> buckets,
                       std::vector<comm::Communicator*> over, std::vector<ElementRange> decayed);
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  std::size_t shard_elements() const { return shard_elements_; }
  /// This rank's block of each bucket, and where it starts in the shard.
  const std::vector<GradientBucket>& owned() const { return owned_; }
  std::size_t shard_offset(std::size_t bucket) const { return shard_offset_.at(bucket); }

  /// Copies the elements of [begin, begin + count) of a full-length fp32
  /// buffer that this rank owns into their places in `shard`.
  void copy_to_shard(const float* full, std::size_t begin, std::size_t count, float* shard,
                     cudaStream_t stream) const;
  /// The reverse, to the host: [begin, begin + count) of the full buffer with
  /// the values this rank owns from `shard` (on the device), NaN elsewhere.
  /// Copies only the owned part; waits for `stream`.
  std::vector<float> values_from_shard(const float* shard, std::size_t begin, std::size_t count,
                                       cudaStream_t stream) const;

  /// Beside tensor and pipeline parallelism the norm is the whole model's
  /// (Megatron's clip_grad_norm): each rank counts its blocks' elements inside
  /// `counted` only (sorted, disjoint ranges of the full buffer: its tp
  /// shards, the replicated tensors on tp rank 0 only, a tied embedding's
  /// first copy only), and the sums are added over each of `then_over` (tp,
  /// pp) after the dp group. Default: every element, dp only.
  void count_in_norm(std::vector<ElementRange> counted, std::vector<comm::Communicator*> then_over);

  /// Queues on `compute` (after the gradients' reduce-scatter): the global
  /// gradient norm into scalars[1] and the clip factor (grad_clip <= 0: none)
  /// into scalars[2], AdamW on this rank's blocks, and the all-gather of every
  /// bucket's bf16 weights; `compute` waits for the gathers. `step` carries the
  /// learning rate and its weight decay, applied to the decayed ranges.
  /// With deferred gathers the all-gathers are left for queue_gathers.
  void queue_step(const OptimizerBuffers& b, const kernels::AdamWStep& step, float grad_clip,
                  cudaStream_t compute);

  /// Megatron's --overlap-param-gather: queue_step leaves the bf16 weights'
  /// all-gathers out (gather_pending() until queue_gathers), so the host's
  /// step ends at the update; the next step queues them first and its forward
  /// waits for each bucket just before the first task that reads it
  /// (first_parameter_reads), overlapping the gathers with the forward.
  void defer_gathers(bool defer) { defer_gathers_ = defer; }
  /// The order queue_gathers issues the buckets in (every bucket once): the
  /// order the forward first reads them, so the first reader's bucket arrives
  /// first. Default: bucket order. std::invalid_argument for another set.
  void gather_in_order(std::vector<int> buckets);
  bool gather_pending() const { return gather_pending_; }
  /// Queues every bucket's all-gather on the dp stream behind the work queued
  /// on `compute` so far, each bucket's followed by its own event.
  void queue_gathers(kernels::Bf16* weights, cudaStream_t compute);
  /// `compute` waits for bucket `bucket`'s last queued all-gather (nothing
  /// when none was queued), or for all of them.
  void wait_for_gather(std::size_t bucket, cudaStream_t compute);
  void wait_for_gathers(cudaStream_t compute);
  /// The gathers pending, if any, queued and waited for by `compute`: the
  /// weights whole again (a collective over dp then; nothing otherwise).
  void settle_gathers(kernels::Bf16* weights, cudaStream_t compute);

 private:
  // `group`'s stream waits for the work queued on `from` so far, and back.
  void group_waits_for(comm::Communicator& group, cudaStream_t from);
  void waits_for_group(comm::Communicator& group, cudaStream_t compute);

  comm::Communicator& dp_;
  std::vector<GradientBucket> buckets_;
  std::vector<comm::Communicator*> over_;      // each bucket's sharding group (nullptr: whole here)
  std::vector<GradientBucket> owned_;          // this rank's block of each bucket
  std::vector<std::size_t> shard_offset_;      // of each owned block in the shard
  std::size_t shard_elements_ = 0;
  std::vector<ElementRange> counted_;  // empty: every element
  std::vector<comm::Communicator*> norm_also_over_;
  std::vector<ElementRange> decayed_;
  CUevent_st* to_group_ = nullptr;  // cudaEvent_t
  CUevent_st* from_group_ = nullptr;
  std::vector<CUevent_st*> gathered_;  // per bucket, after its all-gather
  std::vector<int> gather_order_;      // of the buckets
  bool defer_gathers_ = false;
  bool gather_pending_ = false;
};

}  // namespace sextant::engine::data_parallel
