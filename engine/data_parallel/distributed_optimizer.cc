#include "engine/data_parallel/distributed_optimizer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"

namespace sextant::engine::data_parallel {

DistributedOptimizer::DistributedOptimizer(comm::Communicator& dp, std::vector<GradientBucket> buckets,
                                           std::size_t decay_elements)
    : dp_(dp), buckets_(std::move(buckets)), decay_elements_(decay_elements) {
  const std::size_t ranks = static_cast<std::size_t>(dp_.size());
  const std::size_t multiple = bucket_multiple(dp_.size());
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const GradientBucket& b = buckets_[i];
    if (b.elements % multiple != 0)
      throw std::invalid_argument("DistributedOptimizer: bucket " + std::to_string(i) + " has " +
                                  std::to_string(b.elements) + " elements, not a multiple of 8·dp = " +
                                  std::to_string(multiple));
    const std::size_t block = b.elements / ranks;
    owned_.push_back({b.begin + static_cast<std::size_t>(dp_.rank()) * block, block});
    shard_offset_.push_back(shard_elements_);
    shard_elements_ += block;
  }
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&to_dp_, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&from_dp_, cudaEventDisableTiming));
}

DistributedOptimizer::~DistributedOptimizer() {
  cudaEventDestroy(to_dp_);
  cudaEventDestroy(from_dp_);
}

void DistributedOptimizer::copy_to_shard(const float* full, std::size_t begin, std::size_t count,
                                         float* shard, cudaStream_t stream) const {
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    const std::size_t from = std::max(begin, owned_[b].begin);
    const std::size_t to = std::min(begin + count, owned_[b].begin + owned_[b].elements);
    if (from >= to) continue;
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(shard + shard_offset_[b] + (from - owned_[b].begin), full + from,
                                       (to - from) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
}

void DistributedOptimizer::dp_waits_for(cudaStream_t from) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(to_dp_, from));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(dp_.stream(), to_dp_, 0));
}

void DistributedOptimizer::waits_for_dp(cudaStream_t compute) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(from_dp_, dp_.stream()));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(compute, from_dp_, 0));
}

void DistributedOptimizer::count_in_norm(std::vector<std::pair<std::size_t, std::size_t>> counted,
                                         comm::Communicator* tensor_parallel) {
  counted_ = std::move(counted);
  tp_ = tensor_parallel;
}

void DistributedOptimizer::queue_step(const ShardedOptimizerBuffers& b, const kernels::AdamWStep& step,
                                      float grad_clip, cudaStream_t compute) {
  float* sum_squares = b.scalars;
  float* norm = b.scalars + 1;
  float* scale = b.scalars + 2;
  // ||g||² = the sum over ranks of their blocks' squares (the blocks tile the
  // buffer), of the counted elements only beside tp.
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(sum_squares, 0, sizeof(float), compute));
  for (const GradientBucket& o : owned_) {
    const std::size_t end = o.begin + o.elements;
    auto add = [&](std::size_t from, std::size_t to) {
      if (from < to)
        kernels::grad_sum_squares_accumulate(sum_squares, b.gradients + from, to - from, b.norm_workspace,
                                             b.norm_workspace_bytes, compute);
    };
    if (counted_.empty()) add(o.begin, end);
    for (const auto& [from, to] : counted_) add(std::max(from, o.begin), std::min(to, end));
  }
  dp_waits_for(compute);
  dp_.all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32);
  waits_for_dp(compute);
  if (tp_ != nullptr) {
    SEXTANT_CUDA_CHECK(cudaEventRecord(to_dp_, compute));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(tp_->stream(), to_dp_, 0));
    tp_->all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32);
    SEXTANT_CUDA_CHECK(cudaEventRecord(from_dp_, tp_->stream()));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(compute, from_dp_, 0));
  }
  kernels::grad_clip_scale(norm, scale, sum_squares, grad_clip, compute);

  for (std::size_t i = 0; i < owned_.size(); ++i) {
    const GradientBucket& o = owned_[i];
    const std::size_t end = o.begin + o.elements;
    // [o.begin, split) decayed, [split, end) not.
    const std::size_t split = std::clamp(decay_elements_, o.begin, end);
    kernels::AdamWStep part = step;
    for (const auto& [from, to, decay] : {std::tuple{o.begin, split, step.weight_decay},
                                          std::tuple{split, end, 0.0f}}) {
      if (to == from) continue;
      part.weight_decay = decay;
      const std::size_t s = shard_offset_[i] + (from - o.begin);
      kernels::adamw_update(b.master + s, b.weights + from, b.adam_m + s, b.adam_v + s, b.gradients + from,
                            to - from, part, scale, compute);
    }
  }

  // Every rank's updated blocks to every rank, in place (block r of a bucket is rank r's).
  dp_waits_for(compute);
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    dp_.all_gather(b.weights + owned_[i].begin, b.weights + buckets_[i].begin, owned_[i].elements,
                   comm::DataType::kBf16);
  waits_for_dp(compute);
}

}  // namespace sextant::engine::data_parallel
