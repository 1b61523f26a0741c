// The end of a rank's step (trainer.h): the gradients reduced over dp x cp in the
// Plan's buckets and summed between the tied embedding's two copies, the whole
// model's gradient norm and AdamW, and the loss every rank reports.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data_parallel/distributed_optimizer.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/model/decay_pieces.h"
#include "engine/tensor_parallel/partial_gradients.h"
#include "engine/trainer.h"
#include "engine/trainer_arrays.h"
#include "kernels/adamw.h"
#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"

namespace sextant::engine {

bool Trainer::is_tied_copy(const Chunk& chunk, int tensor) const {
  // The last stage's wte when tied: the first stage's counts for the norm.
  return shape_.tie_embeddings && chunk.parts.output && !chunk.parts.embedding && tensor == chunk.layout.wte();
}

void Trainer::plan_gradient_buckets_of_stage() {
  // The Plan's buckets of this stage (engine/model/gradient_bucket_plan.h) ...
  const std::size_t multiple = layout_.zero >= 1 ? sharded_bucket_multiple(replicas_->size()) : 1;
  std::vector<ElementRange> ranges =
      stage_gradient_bucket_ranges(chunk_layouts(), stage_ == 0, options_.bucket_elements, multiple);
  // ep > 1: no bucket mixes expert tensors (reduced over expert-dp) with the rest (over dp).
  expert_bucket_.assign(ranges.size(), false);
  if (ep_ != nullptr) {
    ExpertSplitRanges split = split_at_expert_tensors(ranges, chunk_layouts());
    ranges = std::move(split.ranges);
    expert_bucket_ = std::move(split.expert);
  }
  reducer_index_.clear();
  int counted[2] = {0, 0};
  for (std::size_t b = 0; b < ranges.size(); ++b) reducer_index_.push_back(counted[expert_bucket_[b] ? 1 : 0]++);
  // ... each reduced after the action that writes the last of its gradients:
  // a tensor's last write is its block's backward (or its tp collective's) of
  // the last micro-batch, found among its chunk's compute actions. A tied
  // embedding's copies on two stages are summed over the embedding group after
  // the schedule first, so the buckets holding one wait for finish_gradients.
  // Under overlap_param_gather, each bucket's bf16 weights are waited for
  // before the first action that reads any of them.
  constexpr std::size_t kAfterSchedule = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> ready(ranges.size(), 0);
  std::vector<std::size_t> first_read(ranges.size(), kAfterSchedule);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const Chunk& chunk = chunks_[c];
    std::vector<sim::Task> tasks;
    std::vector<std::size_t> action_of;
    for (std::size_t k = 0; k < program_.actions.size(); ++k) {
      const StageAction& a = program_.actions[k];
      if (a.kind != StageAction::Kind::kCompute || plan_.tasks[a.task].chunk != c) continue;
      sim::Task t = plan_.tasks[a.task];
      if (t.layer != sim::kNoIndex) t.layer = static_cast<decltype(t.layer)>(a.local_layer);  // the chunk's numbering
      tasks.push_back(t);
      action_of.push_back(k);
    }
    const std::vector<std::size_t> written = final_gradient_writes(chunk.layout, tasks);
    const auto& tensors = chunk.layout.tensors();
    const bool tied_across_stages = embedding_ != nullptr;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::size_t begin = chunk.offset + tensors[i].offset, end = begin + tensors[i].elements();
      const bool tied = tied_across_stages && static_cast<int>(i) == chunk.layout.wte();
      const std::size_t after = tied ? kAfterSchedule : action_of[written[i]];
      for (std::size_t b = 0; b < ranges.size(); ++b)
        if (ranges[b].first < end && ranges[b].second > begin) ready[b] = std::max(ready[b], after);
    }
    // The chunk's part of each bucket, in the chunk's own offsets, for the first reads.
    std::vector<GradientBucketRange> local;
    std::vector<std::size_t> bucket_of;
    const std::size_t chunk_end = chunk.offset + chunk.layout.total_elements();
    for (std::size_t b = 0; b < ranges.size(); ++b) {
      const std::size_t from = std::max(ranges[b].first, chunk.offset), to = std::min(ranges[b].second, chunk_end);
      if (from >= to) continue;
      local.push_back({from - chunk.offset, to - from, 0});
      bucket_of.push_back(b);
    }
    const std::vector<std::vector<int>> reads = first_parameter_reads(chunk.layout, tasks, local);
    for (std::size_t t = 0; t < reads.size(); ++t)
      for (const int l : reads[t]) {
        std::size_t& first = first_read[bucket_of[static_cast<std::size_t>(l)]];
        first = std::min(first, action_of[t]);
      }
  }
  buckets_.clear();
  buckets_after_action_.assign(program_.actions.size(), {});
  gathers_before_action_.assign(program_.actions.size(), {});
  after_schedule_.clear();
  for (std::size_t b = 0; b < ranges.size(); ++b) {
    buckets_.push_back({ranges[b].first, ranges[b].second - ranges[b].first, ready[b]});
    if (ready[b] == kAfterSchedule)
      after_schedule_.push_back(static_cast<int>(b));
    else
      buckets_after_action_[ready[b]].push_back(static_cast<int>(b));
    if (first_read[b] == kAfterSchedule)
      throw std::logic_error("Trainer: no action of the program reads gradient bucket " + std::to_string(b));
    gathers_before_action_[first_read[b]].push_back(static_cast<int>(b));
  }
}

std::vector<data_parallel::GradientBucket> Trainer::bucket_ranges(bool expert) const {
  std::vector<data_parallel::GradientBucket> ranges;
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    if (expert_bucket_[b] == expert) ranges.push_back({buckets_[b].begin, buckets_[b].elements});
  return ranges;
}

void Trainer::sum_partial_gradients(std::size_t begin, std::size_t end) {
  // Sequence parallelism: the replicated tensors' gradients are partial sums
  // over each tp rank's tokens (Korthikanti et al. 2022, Sec. 4.2.2).
  for (const Chunk& chunk : chunks_) {
    if (chunk.partial_gradients == nullptr) continue;
    const std::size_t from = std::max(begin, chunk.offset);
    const std::size_t to = std::min(end, chunk.offset + chunk.layout.total_elements());
    if (from < to)
      chunk.partial_gradients->sum(buffers_.gradients + chunk.offset, from - chunk.offset, to - chunk.offset, *tp_,
                                   stream_);
  }
}

void Trainer::reduce_bucket(int b) {
  const GradientBucketRange& r = buckets_[static_cast<std::size_t>(b)];
  sum_partial_gradients(r.begin, r.begin + r.elements);
  const int index = reducer_index_[static_cast<std::size_t>(b)];
  if (!expert_bucket_[static_cast<std::size_t>(b)])
    reducer_->bucket_ready(index, stream_);
  else if (expert_reducer_ != nullptr)  // dp = ep: each expert on one rank, its gradient whole already
    expert_reducer_->bucket_ready(index, stream_);
}

void Trainer::finish_gradients() {
  if (reducer_ == nullptr) sum_partial_gradients(0, elements_);  // with dp, bucket by bucket
  // Megatron's _allreduce_word_embedding_grads: the two copies' gradients
  // summed, before the dp reduction of the buckets holding them (the sum is
  // the same either way; with the distributed optimizer the copies'
  // reduce-scattered blocks lie at different offsets of the two stages'
  // buffers, so only this order gives both the sum).
  if (embedding_ != nullptr) {
    for (const Chunk& chunk : chunks_) {
      const bool holds = chunk.parts.embedding || (chunk.parts.output && chunk.layout.wte() != LayerTensors::kAbsent);
      if (!holds) continue;
      const ParameterTensor& t = chunk.layout.tensor(chunk.layout.wte());
      float* g = buffers_.gradients + chunk.offset + t.offset;
      on_group(*embedding_, [&] { embedding_->all_reduce_sum(g, g, t.elements(), comm::DataType::kFp32); });
    }
  }
  if (reducer_ != nullptr && reduce_gradients_) {
    for (const int b : after_schedule_) reduce_bucket(b);
    reducer_->finish(stream_);
    if (expert_reducer_ != nullptr) expert_reducer_->finish(stream_);
  }
}

std::vector<ElementRange> Trainer::norm_ranges(std::optional<bool> expert_only) const {
  const bool replicated_here = tp_ == nullptr || tp_->rank() == 0;
  std::vector<ElementRange> ranges;
  bool skipped = true;  // the tensor before was left out (or there was none)
  for (const Chunk& chunk : chunks_) {
    const auto& tensors = chunk.layout.tensors();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const ParameterTensor& t = tensors[i];
      if ((!t.split_over_tp && !replicated_here) || is_tied_copy(chunk, static_cast<int>(i)) ||
          (expert_only && t.expert != *expert_only)) {
        skipped = true;
        continue;
      }
      const std::size_t begin = chunk.offset + t.offset, end = begin + t.elements();
      if (skipped)
        ranges.emplace_back(begin, end);
      else
        ranges.back().second = end;  // the padding since the last counted tensor is zero: one range
      skipped = false;
    }
  }
  // Everything counted: the whole buffer in one sum, padding and all.
  if (!expert_only && ranges.size() == 1 && ranges.front().first == 0) ranges.front().second = elements_;
  return ranges;
}

void Trainer::queue_optimizer(int step) {
  queue_weight_update(step);
  update_expert_biases();
}

void Trainer::queue_weight_update(int step) {
  kernels::AdamWStep s = adamw_step(options_, step);
  if (sharded_) {
    sharded_->queue_step(buffers_, s, static_cast<float>(options_.optimizer.grad_clip), stream_);
    return;
  }
  // ||g||² of the whole model: this rank's tensors (a replicated one on tp rank
  // 0 only, as Megatron's clip_grad_norm; the tied copy not at all), summed
  // over tp and pp. A non-finite norm makes the clip factor NaN and AdamW skip
  // the update (kernels/grad_norm.h), so the step never waits for the host.
  float* sum_squares = buffers_.norm_scalars;
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(sum_squares, 0, sizeof(float), stream_));
  auto accumulate = [&](const std::vector<ElementRange>& ranges) {
    for (const auto& [begin, end] : ranges)
      kernels::grad_sum_squares_accumulate(sum_squares, buffers_.gradients + begin, end - begin,
                                           buffers_.norm_workspace, buffers_.norm_workspace_bytes, stream_);
  };
  if (ep_ != nullptr) {
    // ep > 1: each rank's experts are its own, the rest replicated over the ep
    // group: the experts' squares summed over ep first, then the rest added once.
    accumulate(norm_ranges(true));
    on_group(*ep_, [&] { ep_->all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32); });
    accumulate(norm_ranges(false));
  } else {
    accumulate(norm_ranges());
  }
  for (comm::Communicator* g : {tp_, pp_})
    if (g != nullptr) on_group(*g, [&] { g->all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32); });
  kernels::grad_clip_scale(buffers_.norm_scalars + 1, buffers_.norm_scalars + 2, sum_squares,
                           static_cast<float>(options_.optimizer.grad_clip), stream_);
  const float* scale = buffers_.norm_scalars + 2;
  const float weight_decay = s.weight_decay;
  for_each_decay_piece(0, elements_, decayed_, [&](std::size_t from, std::size_t to, bool decayed) {
    s.weight_decay = decayed ? weight_decay : 0.0f;
    kernels::adamw_update(buffers_.master + from, buffers_.weights + from, buffers_.adam_m + from,
                          buffers_.adam_v + from, buffers_.gradients + from, to - from, s, scale, stream_);
  });
}

double Trainer::read_results(double* grad_norm) {
  // The last stage's per-token losses (micro-batch order); under pp the other
  // stages contribute zeros, so the pp sum is the last stage's exactly.
  const std::size_t per_mb = static_cast<std::size_t>(shape_.tokens());
  const std::size_t local = static_cast<std::size_t>(microbatches_) * per_mb;
  const Chunk& last = chunks_.back();
  float* all = last.parts.output ? last.slots.front()->losses() : nullptr;  // the slots share one losses buffer
  if (pp_ != nullptr) {
    // Zeroed each step: the in-place pp sum below leaves the last stage's losses here.
    if (last.parts.output)
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(losses_, all, local * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    else
      SEXTANT_CUDA_CHECK(cudaMemsetAsync(losses_, 0, local * sizeof(float), stream_));
    all = losses_;
  }
  // Gathered over dp x cp (block cp_rank + cp·dp_rank: sim::group_membership's
  // key): every token of the global batch once.
  const int replicas = replicas_ == nullptr ? 1 : replicas_->size();
  if (replicas_ != nullptr) {
    float* mine = all;
    on_group(*replicas_, [&] { replicas_->all_gather(mine, gathered_losses_, local, comm::DataType::kFp32); });
    all = gathered_losses_;
  }
  const std::size_t total = local * static_cast<std::size_t>(replicas);
  if (pp_ != nullptr) on_group(*pp_, [&] { pp_->all_reduce_sum(all, all, total, comm::DataType::kFp32); });
  std::vector<float> losses(total);
  float norm = 0;
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(losses.data(), all, total * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  if (grad_norm != nullptr)
    SEXTANT_CUDA_CHECK(
        cudaMemcpyAsync(&norm, buffers_.norm_scalars + 1, sizeof(float), cudaMemcpyDeviceToHost, stream_));
  wait_for_compute_stream();
  if (grad_norm != nullptr) *grad_norm = norm;
  // Summed in global micro-batch order, the mean is the one a single rank
  // computes. With cp > 1 each block holds a cp rank's chunks of its dp rank's
  // micro-batches: dp·cp blocks, every token once, summed in another order (in
  // double: the mean differs from one GPU's by rounding only).
  return mean_loss_in_global_order(losses, microbatches_, replicas, per_mb);
}

}  // namespace sextant::engine
