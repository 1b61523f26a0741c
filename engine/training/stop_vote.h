// Every rank stops after the same step, or the others would wait forever in
// the next step's collectives: one rank's Ctrl-C or SIGTERM is summed over the
// data-parallel group, then over the tensor-parallel and the pipeline ones (so
// over the tp·dp·pp world), between steps (one float each, a few microseconds).
#pragma once

#include <chrono>

#include "engine/comm/communicator.h"

namespace sextant::engine::training {

class StopVote {
 public:
  /// The groups may be null (no such parallelism); they must outlive the vote.
  StopVote(comm::Communicator* data_parallel, comm::Communicator* tensor_parallel, comm::Communicator* pipeline,
           std::chrono::milliseconds timeout);
  ~StopVote();
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  /// True when any rank of the world votes to stop; every rank calls it
  /// between the same steps. Waits at most the timeout per group.
  bool any_rank(bool mine);
  /// Whether the vote meets other ranks (false on one GPU).
  bool spans_ranks() const { return flag_ != nullptr; }

 private:
  comm::Communicator* groups_[3];
  std::chrono::milliseconds timeout_;
  float* flag_ = nullptr;
};

}  // namespace sextant::engine::training
