#include "engine/training/stop_vote.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace sextant::engine::training {

StopVote::StopVote(comm::Communicator* data_parallel, comm::Communicator* tensor_parallel,
                   comm::Communicator* pipeline, std::chrono::milliseconds timeout)
    : groups_{data_parallel, tensor_parallel, pipeline}, timeout_(timeout) {
  if (data_parallel != nullptr || tensor_parallel != nullptr || pipeline != nullptr)
    SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&flag_), sizeof(float)));
}

StopVote::~StopVote() {
  if (flag_ != nullptr) cudaFree(flag_);
}

bool StopVote::any_rank(bool mine) {
  float votes = mine ? 1.0f : 0.0f;
  for (comm::Communicator* group : groups_) {
    if (group == nullptr) continue;
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(flag_, &votes, sizeof(float), cudaMemcpyHostToDevice, group->stream()));
    group->all_reduce_sum(flag_, flag_, 1, comm::DataType::kFp32);
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(&votes, flag_, sizeof(float), cudaMemcpyDeviceToHost, group->stream()));
    group->synchronize(timeout_);
  }
  return votes > 0;
}

}  // namespace sextant::engine::training
