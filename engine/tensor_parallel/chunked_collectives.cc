#include "engine/tensor_parallel/chunked_collectives.h"

#include <cuda_runtime_api.h>

#include "engine/tensor_parallel/collectives.h"
#include "engine/tensor_parallel/overlap_schedule.h"
#include "kernels/cuda_check.h"
#include "kernels/sum_buffers.h"

namespace sextant::engine::tensor_parallel {

ChunkedCollectives::ChunkedCollectives(comm::Communicator& tp, cudaStream_t compute)
    : tp_(tp), compute_(compute) {
  shard_copied_ = new_ordering_event();
  reduced_ = new_ordering_event();
  for (int i = 0; i < tp_.size(); ++i) {
    gathered_.push_back(new_ordering_event());
    computed_.push_back(new_ordering_event());
  }
}

ChunkedCollectives::~ChunkedCollectives() {
  cudaEventDestroy(shard_copied_);
  cudaEventDestroy(reduced_);
  for (CUevent_st* e : gathered_) cudaEventDestroy(e);
  for (CUevent_st* e : computed_) cudaEventDestroy(e);
}

void ChunkedCollectives::record(CUevent_st* event, cudaStream_t on) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(event, on));
}

void ChunkedCollectives::wait(cudaStream_t waiter, CUevent_st* event) {
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(waiter, event, 0));
}

void ChunkedCollectives::start_all_gather(const kernels::Bf16* shard, kernels::Bf16* gathered,
                                          std::size_t chunk_elements) {
  const int r = tp_.rank();
  const int n = tp_.size();
  // The rank's own chunk in place first (TE's split_overlap_ag likewise
  // expects it pre-copied into its slot of the gathered buffer), so that the
  // ring sends every chunk from `gathered` and step 0's GEMM needs no transfer.
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(gathered + static_cast<std::size_t>(r) * chunk_elements, shard,
                                     chunk_elements * sizeof(kernels::Bf16), cudaMemcpyDeviceToDevice, compute_));
  // The transfers start after everything queued on compute so far: the own
  // chunk, and the earlier GEMMs that read `gathered` (which this overwrites).
  record(shard_copied_, compute_);
  wait(tp_.stream(), shard_copied_);
  for (int step = 1; step < n; ++step) {
    const std::size_t sent = static_cast<std::size_t>(ring_gather_sent_chunk(r, n, step));
    const std::size_t received = static_cast<std::size_t>(ring_gather_received_chunk(r, n, step));
    tp_.send_recv(gathered + sent * chunk_elements, chunk_elements, ring_next(r, n),
                  gathered + received * chunk_elements, chunk_elements, ring_previous(r, n),
                  comm::DataType::kBf16);
    record(gathered_[static_cast<std::size_t>(step)], tp_.stream());
  }
}

int ChunkedCollectives::wait_gathered(int step) {
  if (step > 0) wait(compute_, gathered_[static_cast<std::size_t>(step)]);
  return ring_gather_received_chunk(tp_.rank(), tp_.size(), step);
}

void ChunkedCollectives::reduce_chunk(int chunk, const kernels::Bf16* partials, kernels::Bf16* staging,
                                      std::size_t chunk_elements) {
  const int r = tp_.rank();
  CUevent_st* computed = computed_[static_cast<std::size_t>(chunk)];
  record(computed, compute_);
  wait(tp_.stream(), computed);
  std::vector<comm::PeerTransfer> sends, receives;
  if (chunk != r) {
    // const_cast: PeerTransfer's pointer is read by a send, never written.
    sends.push_back({const_cast<kernels::Bf16*>(partials) + static_cast<std::size_t>(chunk) * chunk_elements,
                     chunk_elements, chunk});
  } else {
    for (int j = 0; j < tp_.size(); ++j)
      if (j != r) receives.push_back({staging + static_cast<std::size_t>(j) * chunk_elements, chunk_elements, j});
  }
  tp_.exchange(sends, receives, comm::DataType::kBf16);
}

void ChunkedCollectives::finish_reduce_scatter(const kernels::Bf16* partials, const kernels::Bf16* staging,
                                               kernels::Bf16* out, std::size_t chunk_elements) {
  const int r = tp_.rank();
  record(reduced_, tp_.stream());
  wait(compute_, reduced_);
  // Rank order, as the in-process communicator's reduce-scatter adds.
  std::vector<const kernels::Bf16*> inputs;
  for (int j = 0; j < tp_.size(); ++j) {
    const kernels::Bf16* block = j == r ? partials : staging;
    inputs.push_back(block + static_cast<std::size_t>(j) * chunk_elements);
  }
  kernels::sum_buffers(inputs.data(), static_cast<int>(inputs.size()), out, chunk_elements, compute_);
}

}  // namespace sextant::engine::tensor_parallel
