// Sequence parallelism's all-gather and reduce-scatter in tp chunks, so that
// a GEMM can run on each chunk while the next one travels (Megatron-LM
// --tp-comm-overlap; the schedule and its sources: overlap_schedule.h).
//
// Two streams: the communicator's (the transfers) and `compute` (the GEMMs),
// ordered by CUDA events only — the host never waits for the GPU. Each rank
// owns its object and its events (the in-process communicator runs the ranks
// as threads on one GPU: nothing here is shared between them).
//
// All-gather:   start_all_gather(); then for step 0 .. size()−1:
//               chunk = wait_gathered(step); the GEMM of that chunk's rows.
// Reduce-scatter: for chunk 0 .. size()−1: the GEMM of its rows into
//               `partials`; reduce_chunk(chunk); then finish_reduce_scatter().
// Every rank calls them in the same order (the transfers pair up by peer).
#pragma once

#include <cstddef>
#include <vector>

#include "engine/comm/communicator.h"
#include "kernels/bf16.h"
#include "kernels/stream.h"

struct CUevent_st;

namespace sextant::engine::tensor_parallel {

class ChunkedCollectives {
 public:
  /// `tp`: the group (its stream carries the transfers); `compute`: the GEMMs' stream.
  ChunkedCollectives(comm::Communicator& tp, cudaStream_t compute);
  ~ChunkedCollectives();
  ChunkedCollectives(const ChunkedCollectives&) = delete;
  ChunkedCollectives& operator=(const ChunkedCollectives&) = delete;

  int chunks() const { return tp_.size(); }

  /// gathered (size()·chunk_elements): chunk j becomes rank j's `shard`
  /// (chunk_elements). Copies the rank's own shard into its chunk on the
  /// compute stream (after the work queued there: the shard's producer) and
  /// queues the ring's size() − 1 steps on the communicator's stream.
  void start_all_gather(const kernels::Bf16* shard, kernels::Bf16* gathered, std::size_t chunk_elements);
  /// Makes the compute stream wait until ring step `step`'s chunk is in
  /// `gathered` (step 0, the rank's own, is there already) and returns that
  /// chunk's index. Call it for every step in order: the last one joins the
  /// communicator's stream back into the compute stream.
  int wait_gathered(int step);

  /// After the compute stream queued the GEMM of chunk `chunk`'s rows of
  /// `partials` (size()·chunk_elements, this rank's partial products): that
  /// chunk goes to its owner, rank `chunk`, whose other ranks' partials land in
  /// its `staging` (size()·chunk_elements; block j from rank j, its own block unused).
  void reduce_chunk(int chunk, const kernels::Bf16* partials, kernels::Bf16* staging,
                    std::size_t chunk_elements);
  /// After reduce_chunk of every chunk: `out` (chunk_elements) = the sum over
  /// ranks j = 0, 1, ... of rank j's partial of this rank's chunk, fp32
  /// accumulation rounded once (kernels/sum_buffers.h), on the compute stream.
  void finish_reduce_scatter(const kernels::Bf16* partials, const kernels::Bf16* staging, kernels::Bf16* out,
                             std::size_t chunk_elements);

 private:
  void record(CUevent_st* event, cudaStream_t on);
  void wait(cudaStream_t waiter, CUevent_st* event);

  comm::Communicator& tp_;
  cudaStream_t compute_;
  CUevent_st* shard_copied_ = nullptr;   // compute -> tp: the own chunk is in place
  std::vector<CUevent_st*> gathered_;    // tp -> compute: ring step i's chunk arrived
  std::vector<CUevent_st*> computed_;    // compute -> tp: chunk j's partial products are written
  CUevent_st* reduced_ = nullptr;        // tp -> compute: every partial of the own chunk arrived
};

}  // namespace sextant::engine::tensor_parallel
