#include "engine/comm/world_setup.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include "engine/comm/nccl_communicator.h"
#include "engine/launch/rank_map.h"
#include "engine/launch/tcp_rendezvous.h"
#include "kernels/cuda_check.h"

namespace sextant::engine::comm {

JobCommunicators::JobCommunicators() {
  SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
}

JobCommunicators::~JobCommunicators() {
  groups = {};
  world.reset();
  cudaStreamDestroy(stream);
}

std::unique_ptr<JobCommunicators> join_job(const launch::RankEnvironment& rank,
                                           const sim::ParallelLayout& layout, std::ostream& log,
                                           std::chrono::milliseconds timeout) {
  SEXTANT_CUDA_CHECK(cudaSetDevice(rank.local_rank));
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  launch::RendezvousOptions options;
  options.master_addr = rank.master_addr;
  options.master_port = rank.master_port;
  options.rank = rank.rank;
  options.world_size = rank.world_size;
  options.timeout = timeout;
  const launch::RendezvousResult met = launch::rendezvous(
      options, rank.rank == 0 ? nccl_unique_id() : std::vector<std::byte>{},
      launch::placement_line({host, rank.local_rank}));
  if (rank.rank == 0) {
    std::vector<launch::RankPlacement> placements;
    for (const std::string& line : met.rank_lines) placements.push_back(launch::parse_placement_line(line));
    log << "sextant run: " << rank.world_size << " ranks (" << rank.launcher << "), NCCL "
        << nccl_version() << ", layout " << layout.to_spec() << "\n"
        << launch::rank_map_table(placements, layout);
  }
  auto job = std::make_unique<JobCommunicators>();
  job->world = NcclCommunicator::join(met.blob, rank.world_size, rank.rank, job->stream);
  job->groups = make_parallel_groups(*job->world, layout, job->stream);
  return job;
}

}  // namespace sextant::engine::comm
