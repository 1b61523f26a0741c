// Data-parallel gradient reduction bucket by bucket, overlapped with the rest
// of the backward pass (PyTorch DDP, Li et al. 2020, Sec. 3.2.3; Megatron-Core's
// --overlap-grad-reduce): as soon as backward has written a bucket's
// gradients, its all-reduce is queued on the data-parallel communicator's own
// stream behind a CUDA event, so it runs while backward computes the next
// buckets; the optimizer's stream waits for all of them once, at the end.
//
// The reduction sums in fp32 (Megatron reduces bf16 models' gradients in
// fp32). It does not divide by the group size: the loss is scaled by
// 1 / (dp · micro-batches), so the sum is the mean gradient.
//
// Every rank marks the buckets in the same order (the collectives must match),
// each bucket once per step. Not thread-safe; one per rank.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/comm/communicator.h"

struct CUevent_st;

namespace sextant::engine::data_parallel {

/// All-reduce (zero=0: every rank gets every bucket's sum) or reduce-scatter
/// (zero>=1, Megatron's distributed optimizer; Rajbhandari et al. 2020, ZeRO,
/// Sec. 5.1: rank r of the group gets the sum of block r of each bucket, the
/// part of the fp32 masters and Adam moments it updates; the rest of the
/// bucket is left as it was).
enum class Reduction { kAllReduce, kReduceScatter };

struct GradientBucket {
  std::size_t begin = 0;     // first element in the flat gradient buffer
  std::size_t elements = 0;
};

class GradientReducer {
 public:
  /// `grads`: the flat fp32 gradient buffer on the device; `buckets`: disjoint
  /// ranges of it. `dp` should be bound to a stream of its own (not the
  /// compute stream), or nothing overlaps.
  /// With kReduceScatter every bucket's size must be a multiple of the group
  /// size (the parameter layout pads buckets so); std::invalid_argument otherwise.
  GradientReducer(comm::Communicator& dp, float* grads, std::vector<GradientBucket> buckets,
                  Reduction reduction = Reduction::kAllReduce);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Backward has queued the last write to bucket `index` on `compute`: queue
  /// its all-reduce behind that write.
  void bucket_ready(int index, cudaStream_t compute);
  /// The block of bucket `index` this rank owns after a reduce-scatter (all of
  /// it after an all-reduce).
  GradientBucket owned(int index) const;
  /// Makes `compute` wait for every reduction queued since the last finish.
  /// Throws std::logic_error naming the buckets not marked ready.
  void finish(cudaStream_t compute);

 private:
  comm::Communicator& dp_;
  float* grads_;
  std::vector<GradientBucket> buckets_;
  Reduction reduction_;
  std::vector<CUevent_st*> ready_;  // cudaEvent_t, one per bucket
  std::vector<bool> marked_;
  CUevent_st* done_ = nullptr;
};

}  // namespace sextant::engine::data_parallel
