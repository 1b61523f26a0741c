#include "tools/run_cluster.h"

namespace sextant::tools {

namespace {
constexpr const char* kFallbackCluster = "dgx-h100";
}

std::string cluster_of_gpu(const sim::PresetCatalog& catalog, const std::string& gpu_preset) {
  if (gpu_preset.empty()) return "";
  for (const std::string& name : catalog.names("clusters"))
    if (catalog.cluster(name).gpu.name == gpu_preset) return name;
  return "";
}

RunCluster run_cluster(const sim::PresetCatalog& catalog, const std::string& given,
                       const std::string& device_name, const std::string& gpu_preset) {
  if (!given.empty()) {
    const std::string gpu = catalog.cluster(given).gpu.name;
    if (gpu_preset.empty() || gpu == gpu_preset) return {given, ""};
    return {given, "note: --cluster " + given + " predicts for its " + gpu + " while this run trains on " +
                       device_name + " (" + gpu_preset + "); the comparison includes the difference between the two GPUs"};
  }
  if (const std::string found = cluster_of_gpu(catalog, gpu_preset); !found.empty()) return {found, ""};
  if (device_name.empty()) return {kFallbackCluster, ""};
  return {kFallbackCluster, "note: no cluster preset has this GPU (" + device_name +
                                (gpu_preset.empty() ? "" : ", " + gpu_preset) + "); predicting for " +
                                kFallbackCluster + " — give --cluster to choose another"};
}

}  // namespace sextant::tools
