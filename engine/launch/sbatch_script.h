// `sextant run --print-sbatch`: the Slurm batch script that runs the same
// training on several nodes — one task per GPU, each finding its rank in
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID and rank 0's host in
// SLURM_STEP_NODELIST (launch_environment.h), so the script needs no wrapper.
#pragma once

#include <string>
#include <vector>

namespace sextant::engine::launch {

struct SbatchOptions {
  int nodes = 1;
  int gpus_per_node = 8;
  std::string job_name = "sextant";
  std::string time_limit;  // one of Slurm's forms (slurm_time.h); empty leaves the partition's default
  int master_port = 29500;
  /// The command each task runs: the sextant binary and its `run` arguments.
  std::vector<std::string> command;
};

/// The script. #SBATCH lines are read by sbatch, not by a shell, so nothing
/// can be quoted there: a job name other than letters, digits, '_', '.', '-'
/// or a time limit that is not one of Slurm's forms is refused, as is a
/// command word with a control character (a newline or NUL) — each a
/// sim::ConfigError naming the option. The command's words are shell-quoted.
std::string sbatch_script(const SbatchOptions& options);

/// `word` quoted for a POSIX shell when it needs it ('it''s' style).
std::string shell_quote(const std::string& word);

}  // namespace sextant::engine::launch
