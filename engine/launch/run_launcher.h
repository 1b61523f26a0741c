// What `sextant run` does before it trains: print the Slurm script
// (--print-sbatch), or start and supervise one process per local GPU
// (--nproc-per-node N), or — in a process a launcher started — work out the
// complete layout of the job.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/launch/launch_environment.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::launch {

struct LaunchOptions {
  int nproc_per_node = 0;  // 0: not given
  bool print_sbatch = false;
  int nodes = 1;           // --print-sbatch: nodes of the job
  int gpus_per_node = 8;   // --print-sbatch: tasks (GPUs) per node
  std::string time_limit;  // --print-sbatch: "HH:MM:SS"
};

/// Returns the exit code when this process launched or printed instead of
/// training (the command ends with it), nullopt when it should train.
/// `arguments` is this process's argv; `executable` the binary to re-run.
std::optional<int> launch_or_continue(const LaunchOptions& options, const EnvironmentLookup& env,
                                      const std::vector<std::string>& arguments,
                                      const std::string& executable, std::ostream& out,
                                      std::ostream& log);

/// `arguments` without the launch options (--nproc-per-node N, --print-sbatch,
/// --nodes N, --gpus-per-node N, --time T, in either `--opt v` or `--opt=v` form).
std::vector<std::string> without_launch_options(const std::vector<std::string>& arguments);

/// This process's argv and binary (/proc/self/cmdline and /proc/self/exe).
std::vector<std::string> this_process_arguments();
std::string this_executable();

/// The job's complete layout: knobs of `spec` not given are 1, except dp,
/// which fills the world: dp = world_size / (tp·cp·pp). Throws
/// sim::ConfigError("--layout") when the product is not the world size.
sim::ParallelLayout layout_for_world(const sim::PartialLayout& spec, int world_size);

}  // namespace sextant::engine::launch
