// Trainer::first_nonfinite_gradient: which tensor made a step's gradient norm
// non-finite (engine/model/nonfinite_step.h). Run only after such a step, so
// it may be slow-ish: one sum-of-squares kernel per tensor (a few hundred
// launches), a small all-reduce, one copy to the host.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data_parallel/distributed_optimizer.h"
#include "engine/model/nonfinite_step.h"
#include "engine/trainer.h"
#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"

namespace sextant::engine {

std::string Trainer::first_nonfinite_gradient() {
  const std::vector<ParameterTensor>& tensors = layout_.tensors();
  float* sums = nullptr;  // (tensors) one sum of squares each
  SEXTANT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&sums), tensors.size() * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(sums, 0, tensors.size() * sizeof(float), stream_));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const ParameterTensor& t = tensors[i];
    auto add = [&](std::size_t from, std::size_t to) {
      if (from < to)
        kernels::grad_sum_squares_accumulate(sums + i, buffers_.gradients + from, to - from, buffers_.norm_workspace,
                                             buffers_.norm_workspace_bytes, stream_);
    };
    if (!sharded_) {
      add(t.offset, t.offset + t.elements());
      continue;
    }
    // ZeRO-1: only this rank's blocks hold the group's reduced sum.
    for (const data_parallel::GradientBucket& o : sharded_->owned())
      add(std::max(t.offset, o.begin), std::min(t.offset + t.elements(), o.begin + o.elements));
  }
  // A NaN or Inf in any rank's part makes the sum over the group non-finite:
  // every rank then names the same tensor. Without ZeRO the dp ranks hold the
  // same reduced gradients; the tp ranks hold different shards.
  for (comm::Communicator* group : {sharded_ ? dp_ : nullptr, tp_}) {
    if (group == nullptr) continue;
    SEXTANT_CUDA_CHECK(cudaEventRecord(step_done_, stream_));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(group->stream(), step_done_, 0));
    group->all_reduce_sum(sums, sums, tensors.size(), comm::DataType::kFp32);
    SEXTANT_CUDA_CHECK(cudaEventRecord(step_done_, group->stream()));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, step_done_, 0));
  }
  std::vector<float> host(tensors.size());
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  SEXTANT_CUDA_CHECK(cudaFreeAsync(sums, stream_));
  wait_for_compute_stream();
  const int first = first_nonfinite(host);
  return first < 0 ? std::string() : tensors[static_cast<std::size_t>(first)].name;
}

void Trainer::set_gradient(const std::string& name, std::span<const float> values) {
  const ParameterTensor& t = layout_.find(name);
  if (values.size() != t.elements())
    throw std::invalid_argument("set_gradient(" + name + "): " + std::to_string(values.size()) + " values for " +
                                std::to_string(t.elements()) + " elements");
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(buffers_.gradients + t.offset, values.data(), values.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace sextant::engine
