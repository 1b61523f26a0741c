#include "engine/launch/sbatch_script.h"

#include <sstream>
#include <vector>

#include "engine/launch/printable_text.h"
#include "engine/launch/slurm_time.h"
#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

// Everything that would reach the script unquotable or malformed, all at once.
void check_script_values(const SbatchOptions& o) {
  std::vector<sim::Diagnostic> problems;
  if (o.nodes < 1) problems.push_back({"--nodes", 0, 0, "", std::to_string(o.nodes) + ": at least 1"});
  if (o.gpus_per_node < 1)
    problems.push_back({"--gpus-per-node", 0, 0, "", std::to_string(o.gpus_per_node) + ": at least 1"});
  if (o.job_name.empty() || o.job_name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789_.-") != std::string::npos)
    problems.push_back({"job name", 0, 0, "", "'" + printable_text(o.job_name) + "': accepted: letters, digits, '_', '.', '-'"});
  if (!o.time_limit.empty())
    if (const SlurmTime t = parse_slurm_time(o.time_limit); !t.problem.empty())
      problems.push_back({"--time", 0, 0, "", t.problem});
  for (const std::string& word : o.command)
    if (has_control_character(word))
      problems.push_back({"batch script", 0, 0, "",
                          "the argument '" + printable_text(word) + "' holds a control character (a newline, tab or "
                          "other byte below 0x20), which a batch script cannot carry safely; give it without"});
  sim::throw_if_any(problems);
}

}  // namespace

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string sbatch_script(const SbatchOptions& o) {
  check_script_values(o);
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "#SBATCH --job-name=" << o.job_name << "\n"
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
