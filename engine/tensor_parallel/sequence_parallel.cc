#include "engine/tensor_parallel/sequence_parallel.h"

namespace sextant::engine::tensor_parallel {

void SequenceParallel::bind(Collectives& group, bool overlap) {
  group_ = &group;
  input_gather_ = std::make_unique<PendingCollective>();
  input_gradient_scatter_ = std::make_unique<PendingCollective>();
  if (overlap) chunked_ = std::make_unique<ChunkedCollectives>(group.group(), group.compute_stream());
}

bool SequenceParallel::take_input_chunks() {
  const bool taken = input_chunks_;
  input_chunks_ = false;
  return taken;
}

bool SequenceParallel::take_gradient_chunks() {
  const bool taken = gradient_chunks_;
  gradient_chunks_ = false;
  return taken;
}

void SequenceParallel::gather_input(const kernels::Bf16* shard) {
  if (chunked_ == nullptr) {
    group_->all_gather(shard, buffers.gathered_input, shard_elements_);
    return;
  }
  chunked_->start_all_gather(shard, buffers.gathered_input, shard_elements_);
  input_chunks_ = true;
}

void SequenceParallel::send_partial_chunk(int chunk, const kernels::Bf16* partials) {
  chunked_->reduce_chunk(chunk, partials, buffers.staging, shard_elements_);
  partial_chunks_ = true;
}

void SequenceParallel::scatter_output(const kernels::Bf16* partials, kernels::Bf16* shard) {
  if (!partial_chunks_) {
    group_->reduce_scatter(partials, shard, shard_elements_);
    return;
  }
  partial_chunks_ = false;
  chunked_->finish_reduce_scatter(partials, buffers.staging, shard, shard_elements_);
}

void SequenceParallel::gather_output_gradient(const kernels::Bf16* shard) {
  if (chunked_ == nullptr) {
    group_->all_gather(shard, buffers.gathered_gradient, shard_elements_);  // read at once by the GEMM
    return;
  }
  chunked_->start_all_gather(shard, buffers.gathered_gradient, shard_elements_);
  gradient_chunks_ = true;
}

void SequenceParallel::start_input_gather(const kernels::Bf16* shard) {
  group_->start(
      [&](comm::Communicator& c) {
        c.all_gather(shard, buffers.gathered_input, shard_elements_, comm::DataType::kBf16);
      },
      *input_gather_);
}

void SequenceParallel::start_input_gradient_scatter(const kernels::Bf16* full) {
  group_->start(
      [&](comm::Communicator& c) {
        c.reduce_scatter_sum(full, buffers.gradient_shard, shard_elements_, comm::DataType::kBf16);
      },
      *input_gradient_scatter_);
}

void SequenceParallel::finish_input_gradient_scatter(const kernels::Bf16* full) {
  if (input_gradient_scatter_->pending()) {
    input_gradient_scatter_->wait(group_->compute_stream());
    return;
  }
  group_->reduce_scatter(full, buffers.gradient_shard, shard_elements_);
}

}  // namespace sextant::engine::tensor_parallel
