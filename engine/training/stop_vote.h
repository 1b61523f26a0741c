// Every rank stops after the same step, or the others would wait forever in
// the next step's collectives: one rank's Ctrl-C or SIGTERM is summed over the
// tensor-, context-, data-parallel and pipeline groups in turn (so over the
// tp·cp·dp·pp world), between steps (one float each, a few microseconds).
#pragma once

#include <chrono>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"

namespace sextant::engine::training {

class StopVote {
 public:
  /// The rank's groups (default-constructed: one GPU); they must outlive the vote.
  StopVote(const comm::ParallelGroups& groups, std::chrono::milliseconds timeout);
  ~StopVote();
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  /// True when any rank of the world votes to stop; every rank calls it
  /// between the same steps. Waits at most the timeout per group.
  bool any_rank(bool mine);
  /// Whether the vote meets other ranks (false on one GPU).
  bool spans_ranks() const { return flag_ != nullptr; }

 private:
  std::vector<comm::Communicator*> groups_;  // those of more than one rank
  std::chrono::milliseconds timeout_;
  float* flag_ = nullptr;
};

}  // namespace sextant::engine::training
