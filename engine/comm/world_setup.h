// Joining the job's communicators in a process a launcher started: select the
// rank's GPU, meet the other ranks at the TCP rendezvous (rank 0 hands out
// NCCL's unique id), join the NCCL world and split the tp, cp, ep, dp and pp
// groups; rank 0 prints the rank -> host -> GPU -> coordinates map.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>

#include "engine/comm/communicator.h"
#include "engine/comm/parallel_groups.h"
#include "engine/launch/launch_environment.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::comm {

/// This rank's communicators, on one stream it owns.
class JobCommunicators {
 public:
  JobCommunicators();
  ~JobCommunicators();
  JobCommunicators(const JobCommunicators&) = delete;
  JobCommunicators& operator=(const JobCommunicators&) = delete;

  cudaStream_t stream = nullptr;
  std::unique_ptr<Communicator> world;
  ParallelGroups groups;
};

/// Every rank of the job calls this with the same layout (layout.total_gpus()
/// must be the world size). Throws launch::RendezvousError or CommError.
std::unique_ptr<JobCommunicators> join_job(const launch::RankEnvironment& rank,
                                           const sim::ParallelLayout& layout, std::ostream& log,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace sextant::engine::comm
