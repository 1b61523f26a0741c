// `sextant run`'s arguments as given, and the settings they are checked into
// before any GPU is touched: the model and what the engine builds of it, the
// layout the engine executes (engine/training/engine_support.h), the cluster
// and profile --compare and --layout best predict with, the training options.
#pragma once

#include <string>

#include "engine/launch/run_launcher.h"
#include "tools/run_settings.h"

namespace sextant::tools {

struct RunArguments {
  std::string model;
  std::string layout;
  int global_batch = 0;
  long seq_length = 0;
  long gpus = 1;             // the GPUs of this node the run uses (one so far)
  std::string cluster;       // empty: the cluster preset of this machine's GPU (tools/run_cluster.h)
  std::string profile;       // empty: configs/profiles/measured/<gpu>.yaml, else <gpu>.yaml
  RunSettings settings;
  engine::launch::LaunchOptions launch;
  int world_size = 1;  // ranks a launcher started (1: none)
};

/// `a` checked and completed (configs from `configs_dir`). Throws
/// sim::ConfigError (exit code 2) naming the option at fault.
RunSettings checked_settings(const RunArguments& a, const std::string& configs_dir);

}  // namespace sextant::tools
