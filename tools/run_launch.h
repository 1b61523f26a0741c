// `sextant run` started by a launcher (--nproc-per-node, Slurm, Open MPI):
// the rank's place and its layout checked before the ranks meet, then the job
// joined (NCCL and the parallel groups); and the options that start one.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "engine/launch/run_launcher.h"
#include "sim/core/parallel_layout.h"
#include "tools/run_arguments.h"
#include "tools/run_settings.h"
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

/// --print-sbatch's job checked before a line is written, as `run` checks
/// each of its ranks: the launch values that reach the script (--time in
/// Slurm's forms, --nodes x --gpus-per-node), then the model, the layout over
/// those nodes x GPUs ranks and all else `run` refuses before it touches a
/// GPU (checked_settings, prepare_run). Throws sim::ConfigError (exit code 2).
PreparedRun checked_batch_job(RunArguments& a, const std::string& configs_dir);

/// The most GPUs (tasks) per node --gpus-per-node takes: nodes built hold 8
/// (DGX, HGX) or 4 (GB200 trays); 64 leaves room, more is a typo.
constexpr int kMostGpusPerNode = 64;

/// Meets the other ranks, joins NCCL and splits the parallel groups of
/// `layout` (rank 0 prints the rank map). Without a launcher: rank 0 alone.
LaunchedJob join_launched_job(const std::optional<engine::launch::RankEnvironment>& rank,
                              const sim::ParallelLayout& layout);

/// --nproc-per-node, --print-sbatch, --nodes, --gpus-per-node, --time.
void add_launch_options(CLI::App& cmd, engine::launch::LaunchOptions& launch);

}  // namespace sextant::tools
