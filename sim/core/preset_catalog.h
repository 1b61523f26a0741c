// Finds presets by name under a configs/ folder, or takes a path as given.
//
// "gpt3-175b" means <root>/models/gpt3-175b.yaml; anything containing '/' or
// ending in .yaml/.yml is a path. A name that is not there is a ConfigError
// listing the names that are.
#pragma once

#include <string>
#include <vector>

#include "sim/core/cost_profile.h"
#include "sim/core/framework.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"

namespace sextant::sim {

class PresetCatalog {
 public:
  explicit PresetCatalog(std::string root) : root_(std::move(root)) {}

  ModelConfig model(const std::string& name_or_path) const;
  GpuConfig gpu(const std::string& name_or_path) const;
  /// Loads the cluster and the GPU preset it names.
  ClusterConfig cluster(const std::string& name_or_path) const;
  /// `name_or_path` empty: the default profile of `gpu_name` (profiles/<gpu>.yaml).
  CostProfile profile(const std::string& name_or_path, const std::string& gpu_name) const;
  /// A training framework (frameworks/<name>.yaml, sim/core/framework.h).
  Framework framework(const std::string& name_or_path) const;

  /// Preset names in <root>/<kind> ("models", "gpus", ...), sorted.
  std::vector<std::string> names(const std::string& kind) const;
  const std::string& root() const { return root_; }

 private:
  std::string resolve(const std::string& kind, const std::string& name_or_path,
                      const std::string& option) const;
  std::string root_;
};

}  // namespace sextant::sim
