// Who am I in the job: rank, world size and local rank from whatever started
// this process, and where rank 0 (the rendezvous master) listens.
//
// Read in this order, the first that is present wins:
//  1. RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun's
//     names; `sextant run --nproc-per-node` sets them for its children),
//  2. Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the master is the
//     first host of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST),
//  3. Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK; the master is
//     MASTER_ADDR, or this host when all ranks share one node.
// MASTER_ADDR and MASTER_PORT override the launcher's choice; the port
// defaults to 29500 (torchrun's).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace sextant::engine::launch {

/// Reads one environment variable; nullopt when it is not set.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The variables of this process (std::getenv).
EnvironmentLookup process_environment();

inline constexpr int kDefaultMasterPort = 29500;

struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // this process's index on its node: its GPU
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  std::string launcher;  // "env", "slurm" or "openmpi": where the numbers came from
};

/// nullopt when no launcher variable is set (a plain single-process run).
/// Throws sim::ConfigError naming the variable when one is malformed or
/// inconsistent (a rank outside the world, a port out of range, ...).
std::optional<RankEnvironment> rank_environment(const EnvironmentLookup& env);

}  // namespace sextant::engine::launch
