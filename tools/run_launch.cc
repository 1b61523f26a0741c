#include "tools/run_launch.h"

#include <iostream>
#include <string>

#include "engine/launch/slurm_time.h"
#include "engine/training/engine_support.h"
#include "tools/numeric_option.h"
#include "tools/run_layout.h"
#ifdef SEXTANT_HAVE_NCCL
#include "tools/visible_gpu.h"
#endif

namespace sextant::tools {

namespace {

// The --layout of a job of `world_size` ranks refused as every rank refuses it
// (`best` is searched for that world later, on every rank alike).
void check_layout_for_world(const std::string& layout, int world_size) {
  if (layout == "best") return;
  const sim::PartialLayout spec = sim::parse_layout(layout);
  engine::launch::layout_for_world(spec, world_size);  // tp·cp·dp·pp must be the world
  engine::training::refuse_model_parallel(spec);
}

}  // namespace

// The rank's place, and the job's layout checked before any GPU is touched:
// every rank refuses a layout the same way, before they meet (and before a
// build without NCCL says it cannot run several ranks).
std::optional<engine::launch::RankEnvironment> launched_rank(RunArguments& a) {
  auto rank = engine::launch::rank_environment(engine::launch::process_environment());
  if (!rank) return rank;
  check_layout_for_world(a.layout, rank->world_size);
  a.settings.device = rank->local_rank;
  a.world_size = rank->world_size;
  return rank;
}

PreparedRun checked_batch_job(RunArguments& a, const std::string& configs_dir) {
  const engine::launch::LaunchOptions& o = a.launch;
  const std::int64_t world = std::int64_t{o.nodes} * o.gpus_per_node;
  if (world > kMostGpus)
    throw_option_error("--nodes", "", std::to_string(o.nodes) + " nodes of " + std::to_string(o.gpus_per_node) +
                                          " GPUs are " + std::to_string(world) + " ranks; at most " +
                                          std::to_string(kMostGpus));
  if (!o.time_limit.empty())
    if (const engine::launch::SlurmTime t = engine::launch::parse_slurm_time(o.time_limit); !t.problem.empty())
      throw_option_error("--time", "", t.problem);
  a.world_size = static_cast<int>(world);
  check_layout_for_world(a.layout, a.world_size);
  return prepare_run(checked_settings(a, configs_dir));
}

LaunchedJob join_launched_job(const std::optional<engine::launch::RankEnvironment>& rank,
                              const sim::ParallelLayout& layout) {
  LaunchedJob job;
  if (!rank) return job;
  job.world_rank = rank->rank;
#ifdef SEXTANT_HAVE_NCCL
  // Each rank's GPU is checked before NCCL's setup selects it (cudaSetDevice).
  require_visible_gpu("rank " + std::to_string(rank->rank), "local rank", rank->local_rank);
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
  add_whole_number_option(cmd, "--nodes", launch.nodes, "with --print-sbatch: nodes", 1, kMostGpus)
      ->capture_default_str();
  add_whole_number_option(cmd, "--gpus-per-node", launch.gpus_per_node,
                          "with --print-sbatch: GPUs (tasks) per node", 1, kMostGpusPerNode)
      ->capture_default_str();
  cmd.add_option("--time", launch.time_limit,
                 "with --print-sbatch: the job's time limit in one of Slurm's forms: minutes, MM:SS,\n"
                 "HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (default: the partition's)");
}

}  // namespace sextant::tools
