// Strict loading of model, GPU, cluster and cost-profile presets.
//
// Every loader reports all problems at once as a ConfigError whose diagnostics
// carry file:line:col, the key, the value and what is accepted (STYLE.md #5).
#pragma once

#include <string>

#include "sim/core/config_error.h"

#include "sim/core/cost_profile.h"
#include "sim/core/framework.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"

namespace sextant::sim {

/// `file` names the text in messages; the *_file forms read from disk.
ModelConfig load_model_text(const std::string& text, const std::string& file);
ModelConfig load_model_file(const std::string& path);

GpuConfig load_gpu_text(const std::string& text, const std::string& file);
GpuConfig load_gpu_file(const std::string& path);

/// A cluster file names its GPU preset; PresetCatalog resolves that name.
struct ClusterFile {
  ClusterConfig cluster;  // cluster.gpu is empty
  std::string gpu_name;
};
ClusterFile load_cluster_text(const std::string& text, const std::string& file);
ClusterFile load_cluster_file(const std::string& path);

CostProfile load_profile_text(const std::string& text, const std::string& file);
CostProfile load_profile_file(const std::string& path);

Framework load_framework_text(const std::string& text, const std::string& file);
Framework load_framework_file(const std::string& path);

}  // namespace sextant::sim
