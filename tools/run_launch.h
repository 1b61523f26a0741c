// `sextant run` started by a launcher (--nproc-per-node, Slurm, Open MPI):
// the rank's place and its layout checked before the ranks meet, then the job
// joined (NCCL and the parallel groups); and the options that start one.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>

#include "engine/launch/run_launcher.h"
#include "sim/core/parallel_layout.h"
#include "tools/run_arguments.h"
#ifdef SEXTANT_HAVE_NCCL
#include "engine/comm/world_setup.h"
#endif

namespace sextant::tools {

/// A process a launcher started: its communicators (with NCCL) and its rank.
struct LaunchedJob {
#ifdef SEXTANT_HAVE_NCCL
  std::unique_ptr<engine::comm::JobCommunicators> communicators;
#endif
  int world_rank = 0;
};

/// This process's rank when a launcher started it (nullopt otherwise), its
/// --layout refused as every rank refuses it, before they meet; sets `a`'s
/// device and world size.
std::optional<engine::launch::RankEnvironment> launched_rank(RunArguments& a);

/// Meets the other ranks, joins NCCL and splits the parallel groups of
/// `layout` (rank 0 prints the rank map). Without a launcher: rank 0 alone.
LaunchedJob join_launched_job(const std::optional<engine::launch::RankEnvironment>& rank,
                              const sim::ParallelLayout& layout);

/// --nproc-per-node, --print-sbatch, --nodes, --gpus-per-node, --time.
void add_launch_options(CLI::App& cmd, engine::launch::LaunchOptions& launch);

}  // namespace sextant::tools
