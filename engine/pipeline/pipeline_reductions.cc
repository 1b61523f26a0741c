// The end of a pipeline rank's step (pipeline_trainer.h): the gradients
// summed over dp and between the tied embedding's two copies, the whole
// model's gradient norm and AdamW, and the loss every rank reports.
#include <cuda_runtime_api.h>

#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data_parallel/distributed_optimizer.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/model/decay_pieces.h"
#include "engine/pipeline/pipeline_trainer.h"
#include "engine/tensor_parallel/partial_gradients.h"
#include "engine/trainer_arrays.h"
#include "kernels/adamw.h"
#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"

namespace sextant::engine::pipeline {

bool PipelineTrainer::is_tied_copy(const Chunk& chunk, int tensor) const {
  // The last stage's wte when tied: the first stage's counts for the norm.
  return shape_.tie_embeddings && chunk.parts.output && !chunk.parts.embedding && tensor == chunk.layout.wte();
}

void PipelineTrainer::finish_gradients() {
  // Sequence parallelism: the replicated tensors' gradients are partial sums
  // over each tp rank's tokens (Korthikanti et al. 2022, Sec. 4.2.2).
  for (const Chunk& chunk : chunks_)
    if (chunk.partial_gradients != nullptr)
      chunk.partial_gradients->sum(gradients_ + chunk.offset, 0, chunk.layout.total_elements(), *tp_, stream_);
  // Megatron's _allreduce_word_embedding_grads: the two copies' gradients
  // summed, before the dp reduction (the sum is the same either way; with the
  // distributed optimizer the copies' reduce-scattered blocks lie at different
  // offsets of the two stages' buffers, so only this order gives both the sum).
  if (embedding_group_ != nullptr) {
    for (const Chunk& chunk : chunks_) {
      const bool holds = chunk.parts.embedding || (chunk.parts.output && chunk.layout.wte() != LayerTensors::kAbsent);
      if (!holds) continue;
      const ParameterTensor& t = chunk.layout.tensor(chunk.layout.wte());
      float* g = gradients_ + chunk.offset + t.offset;
      on_group(*embedding_group_, [&] { embedding_group_->all_reduce_sum(g, g, t.elements(), comm::DataType::kFp32); });
    }
  }
  if (reducer_ != nullptr) {
    reducer_->bucket_ready(0, stream_);
    reducer_->finish(stream_);
  }
}

std::vector<std::pair<std::size_t, std::size_t>> PipelineTrainer::norm_ranges() const {
  const bool replicated_here = tp_ == nullptr || tp_->rank() == 0;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (const Chunk& chunk : chunks_) {
    const auto& tensors = chunk.layout.tensors();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const ParameterTensor& t = tensors[i];
      if ((!t.split_over_tp && !replicated_here) || is_tied_copy(chunk, static_cast<int>(i))) continue;
      const std::size_t begin = chunk.offset + t.offset;
      if (!ranges.empty() && ranges.back().second == begin)
        ranges.back().second += t.elements();  // adjacent: one range
      else
        ranges.emplace_back(begin, begin + t.elements());
    }
  }
  return ranges;
}

void PipelineTrainer::queue_optimizer(int step) {
  kernels::AdamWStep s = adamw_step(options_, step);
  if (sharded_) {
    sharded_->queue_step({weights_, gradients_, master_, adam_m_, adam_v_, norm_scalars_, norm_workspace_,
                          norm_workspace_bytes_},
                         s, static_cast<float>(options_.optimizer.grad_clip), stream_);
    return;
  }
  // ||g||² of the whole model: this rank's tensors (a replicated one on tp rank
  // 0 only, as Megatron's clip_grad_norm; the tied copy not at all), summed
  // over tp and pp.
  float* sum_squares = norm_scalars_;
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(sum_squares, 0, sizeof(float), stream_));
  for (const auto& [begin, end] : norm_ranges())
    kernels::grad_sum_squares_accumulate(sum_squares, gradients_ + begin, end - begin, norm_workspace_,
                                         norm_workspace_bytes_, stream_);
  if (tp_ != nullptr) on_group(*tp_, [&] { tp_->all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32); });
  on_group(*pp_, [&] { pp_->all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32); });
  kernels::grad_clip_scale(norm_scalars_ + 1, norm_scalars_ + 2, sum_squares,
                           static_cast<float>(options_.optimizer.grad_clip), stream_);
  const float* scale = norm_scalars_ + 2;
  const float weight_decay = static_cast<float>(options_.optimizer.weight_decay);
  for_each_decay_piece(0, elements_, decayed_, [&](std::size_t from, std::size_t to, bool decayed) {
    s.weight_decay = decayed ? weight_decay : 0.0f;
    kernels::adamw_update(master_ + from, weights_ + from, adam_m_ + from, adam_v_ + from, gradients_ + from,
                          to - from, s, scale, stream_);
  });
}

double PipelineTrainer::read_results(double* grad_norm) {
  // The last stage's per-token losses into losses_ (micro-batch order); the
  // other stages' stay zero, so the pp sum is the last stage's exactly.
  const std::size_t per_mb = static_cast<std::size_t>(shape_.tokens());
  const std::size_t local = static_cast<std::size_t>(microbatches_) * per_mb;
  const Chunk& last = chunks_.back();
  // Zeroed each step: the in-place pp sum below leaves the last stage's losses here.
  if (!last.parts.output) SEXTANT_CUDA_CHECK(cudaMemsetAsync(losses_, 0, local * sizeof(float), stream_));
  if (last.parts.output) {
    const std::vector<int>& slot_of = program_.slot_of.back();
    for (int mb = 0; mb < microbatches_; ++mb) {
      const std::size_t at = static_cast<std::size_t>(mb) * per_mb;
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(losses_ + at, last.slots[static_cast<std::size_t>(slot_of[static_cast<std::size_t>(mb)])]->losses() + at,
                                         per_mb * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    }
  }
  const int dp = dp_ == nullptr ? 1 : dp_->size();
  float* all = losses_;
  if (dp_ != nullptr) {
    on_group(*dp_, [&] { dp_->all_gather(losses_, gathered_losses_, local, comm::DataType::kFp32); });
    all = gathered_losses_;
  }
  const std::size_t total = local * static_cast<std::size_t>(dp);
  on_group(*pp_, [&] { pp_->all_reduce_sum(all, all, total, comm::DataType::kFp32); });
  std::vector<float> losses(total);
  float norm = 0;
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(losses.data(), all, total * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  if (grad_norm != nullptr)
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(&norm, norm_scalars_ + 1, sizeof(float), cudaMemcpyDeviceToHost, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (grad_norm != nullptr) *grad_norm = norm;
  return mean_loss_in_global_order(losses, microbatches_, dp, per_mb);
}

}  // namespace sextant::engine::pipeline
