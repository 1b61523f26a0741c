#include "engine/launch/run_launcher.h"

#include <fstream>
#include <iterator>
#include <unistd.h>

#include "engine/launch/sbatch_script.h"
#include "engine/launch/supervisor.h"
#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

struct LaunchFlag {
  const char* name;
  bool takes_value;
};
constexpr LaunchFlag kLaunchFlags[] = {{"--nproc-per-node", true}, {"--print-sbatch", false},
                                       {"--nodes", true}, {"--gpus-per-node", true},
                                       {"--time", true}};

}  // namespace

std::vector<std::string> without_launch_options(const std::vector<std::string>& arguments) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    bool dropped = false;
    for (const LaunchFlag& f : kLaunchFlags) {
      const std::string name = f.name;
      if (arguments[i] == name) {
        dropped = true;
        if (f.takes_value) ++i;
      } else if (f.takes_value && arguments[i].rfind(name + "=", 0) == 0) {
        dropped = true;
      }
      if (dropped) break;
    }
    if (!dropped) out.push_back(arguments[i]);
  }
  return out;
}

std::vector<std::string> this_process_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < all.size()) {
    const std::size_t end = all.find('\0', start);
    out.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string this_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string("sextant");
}

sim::ParallelLayout layout_for_world(const sim::PartialLayout& p, int world_size) {
  sim::ParallelLayout l;
  l.tp = p.tp.value_or(1), l.cp = p.cp.value_or(1), l.pp = p.pp.value_or(1);
  l.vpp = p.vpp.value_or(1), l.ep = p.ep.value_or(1), l.etp = p.etp.value_or(1);
  const int model_parallel = l.tp * l.cp * l.pp;
  auto refuse = [](const std::string& message) {
    throw sim::ConfigError({{"--layout", 0, 0, "", message}});
  };
  if (!p.dp && world_size % model_parallel != 0)
    refuse("tp·cp·pp = " + std::to_string(model_parallel) + " does not divide the " +
           std::to_string(world_size) + " ranks the launcher started");
  l.dp = p.dp.value_or(world_size / model_parallel);
  if (1LL * model_parallel * l.dp != world_size) {
    // Megatron-Core's folding: ep splits the dp ranks, it does not multiply them.
    const int fill = world_size % model_parallel == 0 ? world_size / model_parallel : 0;
    const std::string ep_note =
        l.ep > 1 && fill > 0 && fill % l.ep == 0
            ? "; ep folds over the dp ranks (Megatron-Core's MoE parallel folding), so dp counts all of them: dp=" +
                  std::to_string(fill) + " gives ep=" + std::to_string(l.ep) + " groups of expert-dp " +
                  std::to_string(fill / l.ep)
            : "";
    refuse("tp·cp·dp·pp = " + std::to_string(model_parallel * l.dp) + " is not the " +
           std::to_string(world_size) + " ranks the launcher started (leave dp out to fill them" + ep_note + ")");
  }
  l.mbs = p.mbs.value_or(1);
  l.gbs = p.gbs.value_or(l.mbs * l.dp);
  l.sp = p.sp.value_or(false);
  l.zero = p.zero.value_or(0);
  return l;
}

std::optional<int> launch_or_continue(const LaunchOptions& o, const EnvironmentLookup& env,
                                      const std::vector<std::string>& arguments,
                                      const std::string& executable, std::ostream& out,
                                      std::ostream& log) {
  std::vector<std::string> command = without_launch_options(arguments);
  if (!command.empty()) command[0] = executable;
  if (o.print_sbatch) {
    SbatchOptions s;
    s.nodes = o.nodes;
    s.gpus_per_node = o.gpus_per_node;
    s.time_limit = o.time_limit;
    s.command = command;
    out << sbatch_script(s);
    return 0;
  }
  if (o.nproc_per_node < 1) return std::nullopt;
  if (const auto mine = rank_environment(env); mine && mine->launcher != "env")
    throw sim::ConfigError({{"--nproc-per-node", 0, 0, "",
                             "this process was started by " + mine->launcher +
                                 ", which already starts one process per GPU; leave "
                                 "--nproc-per-node out"}});
  if (env("RANK")) return std::nullopt;  // a child of ours: train
  SupervisorOptions s;
  s.command = command;
  s.nproc = o.nproc_per_node;
  if (const auto port = env("MASTER_PORT")) s.master_port = std::stoi(*port);
  log << "sextant run: starting " << o.nproc_per_node << " ranks on this node (rendezvous on port "
      << s.master_port << ")\n";
  return supervise(s, log).exit_code;
}

}  // namespace sextant::engine::launch
