#include "engine/launch/sbatch_script.h"

#include <sstream>

namespace sextant::engine::launch {

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string sbatch_script(const SbatchOptions& o) {
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "#SBATCH --job-name=" << shell_quote(o.job_name) << "\n"
    << "#SBATCH --nodes=" << o.nodes << "\n"
    << "#SBATCH --ntasks-per-node=" << o.gpus_per_node << "\n"
    << "#SBATCH --gpus-per-node=" << o.gpus_per_node << "\n"
    << "#SBATCH --exclusive\n";
  if (!o.time_limit.empty()) s << "#SBATCH --time=" << o.time_limit << "\n";
  s << "\n"
    << "# " << o.nodes * o.gpus_per_node << " ranks, one per GPU. Each reads its rank from SLURM_PROCID,\n"
    << "# SLURM_NTASKS and SLURM_LOCALID; rank 0 runs on the first host of\n"
    << "# SLURM_STEP_NODELIST and hands NCCL's id to the others on MASTER_PORT.\n"
    << "export MASTER_PORT=${MASTER_PORT:-" << o.master_port << "}\n"
    << "\n"
    << "srun --kill-on-bad-exit=1";
  for (const std::string& word : o.command) s << " " << shell_quote(word);
  s << "\n";
  return s.str();
}

}  // namespace sextant::engine::launch
