#include "tools/run_launch.h"

#include <iostream>
#include <string>

#include "engine/training/engine_support.h"
#include "tools/run_layout.h"

namespace sextant::tools {

// The rank's place, and the job's layout checked before any GPU is touched:
// every rank refuses a layout the same way, before they meet (and before a
// build without NCCL says it cannot run several ranks).
std::optional<engine::launch::RankEnvironment> launched_rank(RunArguments& a) {
  auto rank = engine::launch::rank_environment(engine::launch::process_environment());
  if (!rank) return rank;
  if (a.layout != "best") {  // `best` is searched for this world later, on every rank alike
    const sim::PartialLayout spec = sim::parse_layout(a.layout);
    engine::launch::layout_for_world(spec, rank->world_size);  // tp·cp·dp·pp must be the world
    engine::training::refuse_model_parallel(spec);
  }
  a.settings.device = rank->local_rank;
  a.world_size = rank->world_size;
  return rank;
}

LaunchedJob join_launched_job(const std::optional<engine::launch::RankEnvironment>& rank,
                              const sim::ParallelLayout& layout) {
  LaunchedJob job;
  if (!rank) return job;
  job.world_rank = rank->rank;
#ifdef SEXTANT_HAVE_NCCL
  job.communicators = engine::comm::join_job(*rank, layout, std::cerr);
#else
  (void)layout;
  if (rank->world_size > 1)
    throw_option_error("WORLD_SIZE", "",
        std::to_string(rank->world_size) + " ranks: this sextant was built without NCCL "
        "(libnccl and nccl.h), so it runs one rank only");
#endif
  return job;
}

void add_launch_options(CLI::App& cmd, engine::launch::LaunchOptions& launch) {
  cmd.add_option("--nproc-per-node", launch.nproc_per_node,
                 "start N processes on this node, one per GPU, and supervise them (one fails:\n"
                 "all stop; Ctrl-C: all stop); under Slurm or mpirun leave it out")
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--print-sbatch", launch.print_sbatch,
               "print a Slurm batch script that runs this command on --nodes nodes of\n"
               "--gpus-per-node GPUs (one task per GPU), instead of running it");
  cmd.add_option("--nodes", launch.nodes, "with --print-sbatch: nodes")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--gpus-per-node", launch.gpus_per_node, "with --print-sbatch: GPUs (tasks) per node")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--time", launch.time_limit, "with --print-sbatch: the job's time limit, HH:MM:SS");
}

}  // namespace sextant::tools
