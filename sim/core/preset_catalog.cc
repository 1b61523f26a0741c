#include "sim/core/preset_catalog.h"

#include <algorithm>
#include <filesystem>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/hf_config.h"

namespace sextant::sim {

namespace fs = std::filesystem;

namespace {
bool looks_like_path(const std::string& s) {
  auto ends_with = [&](const char* suffix) {
    const std::string t(suffix);
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  return s.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml");
}
}  // namespace

std::vector<std::string> PresetCatalog::names(const std::string& kind) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(root_) / kind, ec)) {
    if (entry.path().extension() == ".yaml") out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string PresetCatalog::resolve(const std::string& kind, const std::string& name_or_path,
                                   const std::string& option) const {
  if (looks_like_path(name_or_path)) return name_or_path;
  const fs::path path = fs::path(root_) / kind / (name_or_path + ".yaml");
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path.string();
  std::string known;
  for (const std::string& n : names(kind)) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError({{option, 0, 0, "",
                      "no " + kind.substr(0, kind.size() - 1) + " preset named '" + name_or_path +
                          "' in " + (fs::path(root_) / kind).string() +
                          "; accepted: a path to a .yaml file or one of: " +
                          (known.empty() ? "(none found)" : known)}});
}

ModelConfig PresetCatalog::model(const std::string& name_or_path) const {
  // A Hugging Face config.json; its seq_length is max_position_embeddings.
  const std::string json = ".json";
  if (name_or_path.size() > json.size() &&
      name_or_path.compare(name_or_path.size() - json.size(), json.size(), json) == 0) {
    return load_hf_config_file(name_or_path, 0);
  }
  return load_model_file(resolve("models", name_or_path, "--model"));
}

GpuConfig PresetCatalog::gpu(const std::string& name_or_path) const {
  return load_gpu_file(resolve("gpus", name_or_path, "--gpu"));
}

ClusterConfig PresetCatalog::cluster(const std::string& name_or_path) const {
  const std::string path = resolve("clusters", name_or_path, "--cluster");
  ClusterFile parsed = load_cluster_file(path);
  try {
    parsed.cluster.gpu = gpu(parsed.gpu_name);
  } catch (const ConfigError& e) {
    std::vector<Diagnostic> diags = e.diagnostics();
    for (Diagnostic& d : diags) {
      if (d.file == "--gpu") {
        d.file = path;
        d.key = "gpu";
      }
    }
    throw ConfigError(std::move(diags));
  }
  return parsed.cluster;
}

CostProfile PresetCatalog::profile(const std::string& name_or_path,
                                   const std::string& gpu_name) const {
  const std::string path =
      resolve("profiles", name_or_path.empty() ? gpu_name : name_or_path, "--profile");
  CostProfile p = load_profile_file(path);
  if (p.gpu != gpu_name) {
    throw ConfigError({{path, 0, 0, "gpu",
                        "profile is for '" + p.gpu + "' but the cluster's GPU is '" + gpu_name +
                            "'"}});
  }
  return p;
}

Framework PresetCatalog::framework(const std::string& name_or_path) const {
  return load_framework_file(resolve("frameworks", name_or_path, "--framework"));
}

}  // namespace sextant::sim
