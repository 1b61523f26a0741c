#include "engine/tensor_parallel/collectives.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace sextant::engine::tensor_parallel {

CUevent_st* new_ordering_event() {
  cudaEvent_t event = nullptr;
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

PendingCollective::PendingCollective() : done_(new_ordering_event()) {}

PendingCollective::~PendingCollective() { cudaEventDestroy(done_); }

void PendingCollective::wait(cudaStream_t stream) {
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0));
  pending_ = false;
}

Collectives::Collectives(comm::Communicator& group, cudaStream_t compute)
    : group_(group), compute_(compute), ready_(new_ordering_event()), done_(new_ordering_event()) {}

Collectives::~Collectives() {
  cudaEventDestroy(ready_);
  cudaEventDestroy(done_);
}

void Collectives::after_compute() {
  SEXTANT_CUDA_CHECK(cudaEventRecord(ready_, compute_));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(group_.stream(), ready_, 0));
}

void Collectives::before_compute() {
  SEXTANT_CUDA_CHECK(cudaEventRecord(done_, group_.stream()));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
}

void Collectives::record_done(PendingCollective& pending) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(pending.done_, group_.stream()));
  pending.pending_ = true;
}

void Collectives::all_reduce(kernels::Bf16* data, std::size_t count) {
  run([&](comm::Communicator& c) { c.all_reduce_sum(data, data, count, comm::DataType::kBf16); });
}

void Collectives::all_gather(const kernels::Bf16* shard, kernels::Bf16* gathered, std::size_t shard_count) {
  run([&](comm::Communicator& c) { c.all_gather(shard, gathered, shard_count, comm::DataType::kBf16); });
}

void Collectives::reduce_scatter(const kernels::Bf16* full, kernels::Bf16* shard, std::size_t shard_count) {
  run([&](comm::Communicator& c) { c.reduce_scatter_sum(full, shard, shard_count, comm::DataType::kBf16); });
}

}  // namespace sextant::engine::tensor_parallel
