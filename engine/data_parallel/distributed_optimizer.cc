#include "engine/data_parallel/distributed_optimizer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/model/decay_pieces.h"
#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"

namespace sextant::engine::data_parallel {

DistributedOptimizer::DistributedOptimizer(comm::Communicator& dp, std::vector<GradientBucket> buckets,
                                           std::vector<ElementRange> decayed)
    : DistributedOptimizer(dp, buckets, std::vector<comm::Communicator*>(buckets.size(), &dp), std::move(decayed)) {}

DistributedOptimizer::DistributedOptimizer(comm::Communicator& dp, std::vector<GradientBucket> buckets,
                                           std::vector<comm::Communicator*> over, std::vector<ElementRange> decayed)
    : dp_(dp), buckets_(std::move(buckets)), over_(std::move(over)), decayed_(std::move(decayed)) {
  if (over_.size() != buckets_.size())
    throw std::invalid_argument("DistributedOptimizer: " + std::to_string(over_.size()) + " groups for " +
                                std::to_string(buckets_.size()) + " buckets");
  for (std::size_t i = 0; i < decayed_.size(); ++i)
    if (decayed_[i].first > decayed_[i].second || (i > 0 && decayed_[i].first < decayed_[i - 1].second))
      throw std::invalid_argument("DistributedOptimizer: the decayed ranges must be sorted and disjoint");
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const GradientBucket& b = buckets_[i];
    const int ranks = over_[i] == nullptr ? 1 : over_[i]->size();
    const int rank = over_[i] == nullptr ? 0 : over_[i]->rank();
    const std::size_t multiple = bucket_multiple(ranks);
    if (b.elements % multiple != 0)
      throw std::invalid_argument("DistributedOptimizer: bucket " + std::to_string(i) + " has " +
                                  std::to_string(b.elements) + " elements, not a multiple of 8·" +
                                  std::to_string(ranks) + " = " + std::to_string(multiple));
    const std::size_t block = b.elements / static_cast<std::size_t>(ranks);
    owned_.push_back({b.begin + static_cast<std::size_t>(rank) * block, block});
    shard_offset_.push_back(shard_elements_);
    shard_elements_ += block;
  }
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&to_group_, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&from_group_, cudaEventDisableTiming));
  gathered_.assign(buckets_.size(), nullptr);
  for (std::size_t i = 0; i < buckets_.size(); ++i) gather_order_.push_back(static_cast<int>(i));
  for (CUevent_st*& e : gathered_) SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

DistributedOptimizer::~DistributedOptimizer() {
  cudaEventDestroy(to_group_);
  cudaEventDestroy(from_group_);
  for (CUevent_st* e : gathered_) cudaEventDestroy(e);
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

std::vector<float> DistributedOptimizer::values_from_shard(const float* shard, std::size_t begin, std::size_t count,
                                                           cudaStream_t stream) const {
  std::vector<float> values(count, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    const std::size_t from = std::max(begin, owned_[b].begin);
    const std::size_t to = std::min(begin + count, owned_[b].begin + owned_[b].elements);
    if (from >= to) continue;
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(values.data() + (from - begin), shard + shard_offset_[b] + (from - owned_[b].begin),
                                       (to - from) * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return values;
}

void DistributedOptimizer::group_waits_for(comm::Communicator& group, cudaStream_t from) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(to_group_, from));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(group.stream(), to_group_, 0));
}

void DistributedOptimizer::waits_for_group(comm::Communicator& group, cudaStream_t compute) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(from_group_, group.stream()));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(compute, from_group_, 0));
}

void DistributedOptimizer::count_in_norm(std::vector<ElementRange> counted, std::vector<comm::Communicator*> then_over) {
  counted_ = std::move(counted);
  norm_also_over_ = std::move(then_over);
}

void DistributedOptimizer::queue_step(const OptimizerBuffers& b, const kernels::AdamWStep& step,
                                      float grad_clip, cudaStream_t compute) {
  float* sum_squares = b.norm_scalars;
  float* norm = b.norm_scalars + 1;
  float* scale = b.norm_scalars + 2;
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
  // Summed over dp, then over tp and pp beside them (each group's stream in turn).
  auto sum_over = [&](comm::Communicator& group) {
    group_waits_for(group, compute);
    group.all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32);
    waits_for_group(group, compute);
  };
  sum_over(dp_);
  for (comm::Communicator* group : norm_also_over_) sum_over(*group);
  kernels::grad_clip_scale(norm, scale, sum_squares, grad_clip, compute);

  // AdamW on each owned block, in pieces: inside a decayed range with the
  // step's weight decay, outside without.
  for (std::size_t i = 0; i < owned_.size(); ++i) {
    const GradientBucket& o = owned_[i];
    for_each_decay_piece(o.begin, o.begin + o.elements, decayed_, [&](std::size_t from, std::size_t to, bool decayed) {
      kernels::AdamWStep part = step;
      part.weight_decay = decayed ? step.weight_decay : 0.0f;
      const std::size_t s = shard_offset_[i] + (from - o.begin);
      kernels::adamw_update(b.master + s, b.weights + from, b.adam_m + s, b.adam_v + s, b.gradients + from,
                            to - from, part, scale, compute);
    });
  }

  gather_pending_ = true;
  if (!defer_gathers_) settle_gathers(b.weights, compute);
}

void DistributedOptimizer::settle_gathers(kernels::Bf16* weights, cudaStream_t compute) {
  if (!gather_pending_) return;
  queue_gathers(weights, compute);
  wait_for_gathers(compute);
}

void DistributedOptimizer::queue_gathers(kernels::Bf16* weights, cudaStream_t compute) {
  // Every rank's updated blocks to every rank of the bucket's group, in place
  // (block r of a bucket is rank r's); each group's stream first waits for the update.
  std::vector<comm::Communicator*> waiting;
  for (const int bucket : gather_order_) {
    const std::size_t i = static_cast<std::size_t>(bucket);
    comm::Communicator* group = over_[i];
    if (group == nullptr) continue;  // updated whole here
    if (std::find(waiting.begin(), waiting.end(), group) == waiting.end()) {
      group_waits_for(*group, compute);
      waiting.push_back(group);
    }
    group->all_gather(weights + owned_[i].begin, weights + buckets_[i].begin, owned_[i].elements,
                      comm::DataType::kBf16);
    SEXTANT_CUDA_CHECK(cudaEventRecord(gathered_[i], group->stream()));
  }
  gather_pending_ = false;
}

void DistributedOptimizer::gather_in_order(std::vector<int> buckets) {
  std::vector<int> sorted = buckets;
  std::sort(sorted.begin(), sorted.end());
  bool every_bucket_once = sorted.size() == buckets_.size();
  for (std::size_t i = 0; every_bucket_once && i < sorted.size(); ++i) every_bucket_once = sorted[i] == static_cast<int>(i);
  if (!every_bucket_once)
    throw std::invalid_argument("DistributedOptimizer::gather_in_order: not every one of the " +
                                std::to_string(buckets_.size()) + " buckets once");
  gather_order_ = std::move(buckets);
}

void DistributedOptimizer::wait_for_gather(std::size_t bucket, cudaStream_t compute) {
  if (over_.at(bucket) == nullptr) return;  // never gathered
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(compute, gathered_[bucket], 0));
}

void DistributedOptimizer::wait_for_gathers(cudaStream_t compute) {
  for (std::size_t i = 0; i < gathered_.size(); ++i) wait_for_gather(i, compute);
}

}  // namespace sextant::engine::data_parallel
