// A job's time limit as Slurm's sbatch --time reads it. sbatch accepts
// "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes" and "days-hours:minutes:seconds" (sbatch(1), --time);
// anything else would be written into an #SBATCH line that the cluster only
// rejects when the job is submitted, or — with a ';' or a newline — into the
// script itself. So --print-sbatch accepts these forms only, digits only, with
// every field after the first in its clock range.
#pragma once

#include <cstdint>
#include <string>

namespace sextant::engine::launch {

/// The longest limit accepted: a year. Past it a typo (an extra digit) is
/// likelier than a wish; a cluster without a limit takes "no --time".
constexpr std::int64_t kLongestSlurmTimeS = 365LL * 24 * 3600;

/// `text`'s length in seconds, or the problem with it: `problem` names the
/// field at fault and the accepted forms; `seconds` is 0 then.
struct SlurmTime {
  std::int64_t seconds = 0;
  std::string problem;  // empty: accepted
};

SlurmTime parse_slurm_time(const std::string& text);

}  // namespace sextant::engine::launch
