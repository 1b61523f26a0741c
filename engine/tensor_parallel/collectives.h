// A tensor-parallel group's collectives, ordered with the model's compute
// stream: Megatron-Core's tensor_parallel/mappings.py (the all-reduce, all-gather
// and reduce-scatter that enter and leave a tensor-parallel region; Shoeybi
// et al. 2019, Sec. 3, its f and g operators; Korthikanti et al. 2022,
// Sec. 4.2.2, their sequence-parallel forms).
//
// The collectives run on the communicator's stream. Each waits for the work
// queued on the compute stream before the call (its inputs), and the compute
// stream's later work waits for it (its outputs), by CUDA events: the host
// never waits. start() runs one without the second wait, for work that
// overlaps it; PendingCollective::wait() joins it back later.
#pragma once

#include <cstddef>

#include "engine/comm/communicator.h"
#include "kernels/bf16.h"
#include "kernels/stream.h"

struct CUevent_st;

namespace sextant::engine::tensor_parallel {

/// A CUDA event that orders two streams (timing disabled); the caller destroys
/// it with cudaEventDestroy.
CUevent_st* new_ordering_event();

/// A collective started by Collectives::start and not yet waited for.
class PendingCollective {
 public:
  PendingCollective();  // needs a CUDA device (an event)
  ~PendingCollective();
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;

  bool pending() const { return pending_; }
  /// Makes `stream`'s later work wait for the collective; it is then no longer pending.
  void wait(cudaStream_t stream);

 private:
  friend class Collectives;
  CUevent_st* done_ = nullptr;  // cudaEvent_t, recorded on the group's stream
  bool pending_ = false;
};

class Collectives {
 public:
  /// `group`: the tp ranks (its stream carries the transfers); `compute`: the model's stream.
  Collectives(comm::Communicator& group, cudaStream_t compute);  // needs a CUDA device (events)
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  comm::Communicator& group() const { return group_; }
  cudaStream_t compute_stream() const { return compute_; }

  /// data (count bf16) summed over the group in place.
  void all_reduce(kernels::Bf16* data, std::size_t count);
  /// gathered (size()·shard_count): block j is rank j's shard (shard_count).
  void all_gather(const kernels::Bf16* shard, kernels::Bf16* gathered, std::size_t shard_count);
  /// shard (shard_count) = the sum over ranks of block rank() of their full (size()·shard_count).
  void reduce_scatter(const kernels::Bf16* full, kernels::Bf16* shard, std::size_t shard_count);

  /// Runs `collective(group())` ordered with the compute stream as the above are.
  template <typename Collective>
  void run(Collective&& collective) {
    const bool own_stream = group_.stream() != compute_;
    if (own_stream) after_compute();
    collective(group_);
    if (own_stream) before_compute();
  }
  /// Runs `collective(group())` after the compute stream's work so far and
  /// leaves it running: `pending` says when it is done.
  template <typename Collective>
  void start(Collective&& collective, PendingCollective& pending) {
    after_compute();
    collective(group_);
    record_done(pending);
  }

 private:
  void after_compute();   // the group's stream waits for the compute stream's work so far
  void before_compute();  // the compute stream's later work waits for the group's stream
  void record_done(PendingCollective& pending);

  comm::Communicator& group_;
  cudaStream_t compute_;
  CUevent_st* ready_ = nullptr;  // cudaEvent_t: compute -> the group's stream
  CUevent_st* done_ = nullptr;   // the group's stream -> compute
};

}  // namespace sextant::engine::tensor_parallel
