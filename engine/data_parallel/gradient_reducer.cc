#include "engine/data_parallel/gradient_reducer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"

namespace sextant::engine::data_parallel {

GradientReducer::GradientReducer(comm::Communicator& dp, float* grads,
                                 std::vector<GradientBucket> buckets, Reduction reduction)
    : dp_(dp), grads_(grads), buckets_(std::move(buckets)), reduction_(reduction),
      ready_(buckets_.size(), nullptr), marked_(buckets_.size(), false) {
  if (reduction_ == Reduction::kReduceScatter)
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      if (buckets_[i].elements % static_cast<std::size_t>(dp_.size()) != 0)
        throw std::invalid_argument("GradientReducer: bucket " + std::to_string(i) + " has " +
                                    std::to_string(buckets_[i].elements) +
                                    " elements, not a multiple of the " +
                                    std::to_string(dp_.size()) + " ranks it is scattered over");
  for (auto& e : ready_) SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

GradientReducer::~GradientReducer() {
  for (auto e : ready_) cudaEventDestroy(e);
  cudaEventDestroy(done_);
}

void GradientReducer::bucket_ready(int index, cudaStream_t compute) {
  const auto i = static_cast<std::size_t>(index);
  if (i >= buckets_.size())
    throw std::out_of_range("GradientReducer::bucket_ready: bucket " + std::to_string(index) +
                            " of " + std::to_string(buckets_.size()));
  if (marked_[i])
    throw std::logic_error("GradientReducer::bucket_ready: bucket " + std::to_string(index) +
                           " marked twice in one step");
  marked_[i] = true;
  SEXTANT_CUDA_CHECK(cudaEventRecord(ready_[i], compute));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(dp_.stream(), ready_[i], 0));
  float* bucket = grads_ + buckets_[i].begin;
  if (reduction_ == Reduction::kAllReduce) {
    dp_.all_reduce_sum(bucket, bucket, buckets_[i].elements, comm::DataType::kFp32);
  } else {
    // In place: this rank's block of the bucket receives its sum (NCCL allows
    // recv == send + rank·recv_count).
    const GradientBucket mine = owned(index);
    dp_.reduce_scatter_sum(bucket, grads_ + mine.begin, mine.elements, comm::DataType::kFp32);
  }
}

GradientBucket GradientReducer::owned(int index) const {
  const GradientBucket& b = buckets_.at(static_cast<std::size_t>(index));
  if (reduction_ == Reduction::kAllReduce) return b;
  const std::size_t block = b.elements / static_cast<std::size_t>(dp_.size());
  return {b.begin + static_cast<std::size_t>(dp_.rank()) * block, block};
}

void GradientReducer::finish(cudaStream_t compute) {
  std::string missing;
  for (std::size_t i = 0; i < marked_.size(); ++i)
    if (!marked_[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  if (!missing.empty())
    throw std::logic_error("GradientReducer::finish: buckets " + missing + " were not marked ready");
  SEXTANT_CUDA_CHECK(cudaEventRecord(done_, dp_.stream()));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(compute, done_, 0));
  std::fill(marked_.begin(), marked_.end(), false);
}

}  // namespace sextant::engine::data_parallel
