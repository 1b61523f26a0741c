#include "engine/training/stop_vote.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace sextant::engine::training {

StopVote::StopVote(const comm::ParallelGroups& groups, std::chrono::milliseconds timeout) : timeout_(timeout) {
  for (const sim::ParallelGroup kind :
       {sim::ParallelGroup::kTp, sim::ParallelGroup::kCp, sim::ParallelGroup::kDp, sim::ParallelGroup::kPp})
    if (comm::Communicator* g = groups.spanning(kind)) groups_.push_back(g);
  if (!groups_.empty()) SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&flag_), sizeof(float)));
}

StopVote::~StopVote() {
  if (flag_ != nullptr) cudaFree(flag_);
}

bool StopVote::any_rank(bool mine) {
  float votes = mine ? 1.0f : 0.0f;
  for (comm::Communicator* group : groups_) {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(flag_, &votes, sizeof(float), cudaMemcpyHostToDevice, group->stream()));
    group->all_reduce_sum(flag_, flag_, 1, comm::DataType::kFp32);
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(&votes, flag_, sizeof(float), cudaMemcpyDeviceToHost, group->stream()));
    group->synchronize(timeout_);
  }
  return votes > 0;
}

}  // namespace sextant::engine::training
