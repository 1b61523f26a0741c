#include "sim/core/preset_catalog.h"

#include <algorithm>
#include <filesystem>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/hf_config.h"
#include "sim/core/nearest_name.h"

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
  std::error_code ec;
  if (fs::is_directory(name_or_path, ec)) {
    throw ConfigError({{option, 0, 0, "",
                        "'" + name_or_path + "' is a directory; give a " +
                            kind.substr(0, kind.size() - 1) + " preset name or a .yaml file"}});
  }
  if (looks_like_path(name_or_path)) return name_or_path;
  const fs::path path = fs::path(root_) / kind / (name_or_path + ".yaml");
  if (fs::is_regular_file(path, ec)) return path.string();
  const std::vector<std::string> presets = names(kind);
  std::string known;
  for (const std::string& n : presets) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError({{option, 0, 0, "",
                      "no " + kind.substr(0, kind.size() - 1) + " preset named '" + name_or_path +
                          "'" + did_you_mean(name_or_path, presets, PrefixMatch::kIgnored) + " in " +
                          (fs::path(root_) / kind).string() +
                          "; accepted: a path to a .yaml file or one of: " +
                          (known.empty() ? "(none found)" : known)}});
}

ModelConfig PresetCatalog::model(const std::string& name_or_path,
                                 std::int64_t seq_length) const {
  // A Hugging Face model folder (a Hub checkout) holds its config.json.
  std::error_code ec;
  if (fs::is_directory(name_or_path, ec) &&
      fs::is_regular_file(fs::path(name_or_path) / "config.json", ec)) {
    return load_hf_config_file((fs::path(name_or_path) / "config.json").string(), seq_length);
  }
  const std::string json = ".json";
  if (name_or_path.size() > json.size() &&
      name_or_path.compare(name_or_path.size() - json.size(), json.size(), json) == 0) {
    return load_hf_config_file(name_or_path, seq_length);
  }
  if (fs::is_directory(name_or_path, ec)) {
    throw ConfigError({{"--model", 0, 0, "",
                        "'" + name_or_path + "' is a directory without a config.json; give a "
                        "model preset name, a model .yaml file, a HuggingFace config.json or "
                        "the folder holding one"}});
  }
  ModelConfig m = load_model_file(resolve("models", name_or_path, "--model"));
  if (seq_length > 0) m.seq_length = seq_length;
  return m;
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
