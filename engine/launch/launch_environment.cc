#include "engine/launch/launch_environment.h"

#include <cstdlib>
#include <vector>

#include "engine/launch/host_list.h"
#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

[[noreturn]] void bad(const std::string& variable, const std::string& message) {
  throw sim::ConfigError({{variable, 0, 0, "", message}});
}

// The integer in `variable`, which must be set when `required`.
std::optional<int> integer(const EnvironmentLookup& env, const std::string& variable,
                           bool required, int min_value) {
  const std::optional<std::string> text = env(variable);
  if (!text) {
    if (required) bad(variable, "is not set (the launcher sets it beside the others)");
    return std::nullopt;
  }
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size())
    bad(variable, "'" + *text + "' is not an integer");
  if (value < min_value)
    bad(variable, std::to_string(value) + " is below " + std::to_string(min_value));
  return value;
}

RankEnvironment numbers(const EnvironmentLookup& env, const char* rank, const char* size,
                        const char* local_rank, const char* launcher) {
  RankEnvironment out;
  out.launcher = launcher;
  out.rank = *integer(env, rank, true, 0);
  out.world_size = *integer(env, size, true, 1);
  out.local_rank = integer(env, local_rank, false, 0).value_or(0);
  if (out.rank >= out.world_size)
    bad(rank, std::to_string(out.rank) + " is not below " + size + " = " +
                  std::to_string(out.world_size));
  return out;
}

void apply_master_overrides(const EnvironmentLookup& env, RankEnvironment& out) {
  if (const auto addr = env("MASTER_ADDR"); addr && !addr->empty()) out.master_addr = *addr;
  if (const auto port = integer(env, "MASTER_PORT", false, 1)) {
    if (*port > 65535) bad("MASTER_PORT", std::to_string(*port) + " is not a TCP port (1 to 65535)");
    out.master_port = *port;
  }
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<RankEnvironment> rank_environment(const EnvironmentLookup& env) {
  RankEnvironment out;
  if (env("RANK") || env("WORLD_SIZE")) {
    out = numbers(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "env");
    if (out.world_size > 1 && !env("MASTER_ADDR"))
      bad("MASTER_ADDR", "is not set; with RANK and WORLD_SIZE it names rank 0's host");
  } else if (env("SLURM_PROCID")) {
    out = numbers(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm");
    const char* list_variable = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    if (const auto list = env(list_variable))
      out.master_addr = expand_host_list(*list, list_variable).front();
    else if (out.world_size > 1 && !env("MASTER_ADDR"))
      bad("SLURM_STEP_NODELIST", "is not set, nor SLURM_JOB_NODELIST or MASTER_ADDR: no host "
                                 "for rank 0's rendezvous");
  } else if (env("OMPI_COMM_WORLD_RANK")) {
    out = numbers(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                  "openmpi");
    const int local_size = integer(env, "OMPI_COMM_WORLD_LOCAL_SIZE", false, 1).value_or(0);
    if (local_size != out.world_size && !env("MASTER_ADDR"))
      bad("MASTER_ADDR", "is not set; Open MPI does not say which host runs rank 0, so with "
                         "ranks on several nodes set MASTER_ADDR (e.g. mpirun -x MASTER_ADDR=node01)");
  } else {
    return std::nullopt;
  }
  apply_master_overrides(env, out);
  return out;
}

}  // namespace sextant::engine::launch
