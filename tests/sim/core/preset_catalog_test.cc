// PresetCatalog over the real configs/ folder: every preset must load, and a
// name that is not there lists the names that are.
#include "sim/core/preset_catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"

namespace sextant::sim {
namespace {

const std::string kConfigs = SEXTANT_TEST_CONFIG_DIR;

// The diagnostics of what `load` throws, as the user reads them.
template <typename Load>
std::vector<std::string> errors(Load&& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
    for (const Diagnostic& d : e.diagnostics()) out.push_back(d.to_string());
    return out;
  }
  return {};
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

TEST(PresetCatalog, EveryModelPresetLoads) {
  const PresetCatalog catalog(kConfigs);
  const std::vector<std::string> names = catalog.names("models");
  ASSERT_FALSE(names.empty()) << kConfigs;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    EXPECT_EQ(errors([&] { catalog.model(name); }), std::vector<std::string>{});
    // A preset's name: key matches its file name, so either can be used.
    EXPECT_EQ(catalog.model(name).name, name);
  }
}

TEST(PresetCatalog, EveryGpuPresetLoadsWithItsDefaultProfile) {
  const PresetCatalog catalog(kConfigs);
  const std::vector<std::string> names = catalog.names("gpus");
  ASSERT_FALSE(names.empty()) << kConfigs;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    EXPECT_EQ(errors([&] { catalog.gpu(name); }), std::vector<std::string>{});
    EXPECT_EQ(catalog.gpu(name).name, name);
    EXPECT_FALSE(catalog.gpu(name).source.empty());
    EXPECT_EQ(errors([&] { catalog.profile("", name); }), std::vector<std::string>{});
    EXPECT_EQ(catalog.profile("", name).gpu, name);
  }
}

TEST(PresetCatalog, EveryClusterPresetLoadsWithItsGpu) {
  const PresetCatalog catalog(kConfigs);
  const std::vector<std::string> names = catalog.names("clusters");
  ASSERT_FALSE(names.empty()) << kConfigs;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    EXPECT_EQ(errors([&] { catalog.cluster(name); }), std::vector<std::string>{});
    const ClusterConfig c = catalog.cluster(name);
    EXPECT_EQ(c.name, name);
    EXPECT_FALSE(c.gpu.name.empty());
    EXPECT_GT(c.gpu.peak_bf16_flops_per_s, 0);
    EXPECT_FALSE(c.source.empty());
  }
}

TEST(PresetCatalog, EveryProfileNamesAGpuPreset) {
  const PresetCatalog catalog(kConfigs);
  for (const std::string& name : catalog.names("profiles")) {
    SCOPED_TRACE(name);
    const CostProfile p = load_profile_file(kConfigs + "/profiles/" + name + ".yaml");
    EXPECT_EQ(errors([&] { catalog.gpu(p.gpu); }), std::vector<std::string>{});
  }
}

TEST(PresetCatalog, NamesAreSortedStems) {
  const PresetCatalog catalog(kConfigs);
  const std::vector<std::string> names = catalog.names("gpus");
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& n : names) EXPECT_EQ(n.find(".yaml"), std::string::npos) << n;
  EXPECT_EQ(catalog.names("no-such-kind"), std::vector<std::string>{});
}

TEST(PresetCatalog, UnknownModelNameListsTheAcceptedNames) {
  const PresetCatalog catalog(kConfigs);
  EXPECT_EQ(errors([&] { catalog.model("gpt5"); }),
            std::vector<std::string>{"--model: no model preset named 'gpt5' in " + kConfigs +
                                     "/models; accepted: a path to a .yaml file or one of: " +
                                     joined(catalog.names("models"))});
}

TEST(PresetCatalog, UnknownGpuClusterAndProfileNames) {
  const PresetCatalog catalog(kConfigs);
  EXPECT_EQ(errors([&] { catalog.gpu("b200"); }),
            std::vector<std::string>{"--gpu: no gpu preset named 'b200' in " + kConfigs +
                                     "/gpus; accepted: a path to a .yaml file or one of: " +
                                     joined(catalog.names("gpus"))});
  EXPECT_EQ(errors([&] { catalog.cluster("selene"); }),
            std::vector<std::string>{"--cluster: no cluster preset named 'selene' in " + kConfigs +
                                     "/clusters; accepted: a path to a .yaml file or "
                                     "one of: " +
                                     joined(catalog.names("clusters"))});
  EXPECT_EQ(errors([&] { catalog.profile("", "b200"); }),
            std::vector<std::string>{"--profile: no profile preset named 'b200' in " + kConfigs +
                                     "/profiles; accepted: a path to a .yaml file or one of: " +
                                     joined(catalog.names("profiles"))});
}

TEST(PresetCatalog, EmptyFolderSaysNoneFound) {
  const PresetCatalog catalog("/nonexistent/sextant-configs");
  EXPECT_EQ(errors([&] { catalog.model("gpt3-175b"); }),
            std::vector<std::string>{"--model: no model preset named 'gpt3-175b' in "
                                     "/nonexistent/sextant-configs/models; accepted: a path to a "
                                     ".yaml file or one of: (none found)"});
}

TEST(PresetCatalog, PathsAreTakenAsGiven) {
  const PresetCatalog catalog("/nonexistent/sextant-configs");
  const std::string path = kConfigs + "/models/gpt3-175b.yaml";
  EXPECT_EQ(catalog.model(path).name, "gpt3-175b");
  // Anything with a '/' or a .yaml/.yml ending is a path, even if missing.
  EXPECT_EQ(errors([&] { catalog.model("missing.yml"); }),
            std::vector<std::string>{
                "missing.yml: cannot open file (does it exist and is it readable?)"});
}

TEST(PresetCatalog, ClusterNamingAnUnknownGpuPointsAtItsFile) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / "sextant_preset_catalog_test";
  fs::create_directories(root / "clusters");
  fs::create_directories(root / "gpus");
  const std::string path = (root / "clusters" / "c.yaml").string();
  std::ofstream(path) << "name: c\n"
                         "gpu: b200\n"
                         "gpus_per_node: 8\n"
                         "num_nodes: 1\n"
                         "intra_node_bandwidth_bytes_per_s: 900e9\n"
                         "inter_node_bandwidth_bytes_per_s: 50e9\n"
                         "intra_node_latency_s: 3e-6\n"
                         "inter_node_latency_s: 6e-6\n"
                         "source: test\n";
  const PresetCatalog catalog(root.string());
  EXPECT_EQ(errors([&] { catalog.cluster("c"); }),
            std::vector<std::string>{path + ": gpu: no gpu preset named 'b200' in " +
                                     (root / "gpus").string() +
                                     "; accepted: a path to a .yaml file or one of: (none found)"});
  fs::remove_all(root);
}

TEST(PresetCatalog, ProfileForAnotherGpuIsRejected) {
  const PresetCatalog catalog(kConfigs);
  const std::vector<std::string> gpus = catalog.names("gpus");
  ASSERT_GE(gpus.size(), 2u);
  EXPECT_EQ(errors([&] { catalog.profile(gpus[0], gpus[1]); }),
            std::vector<std::string>{kConfigs + "/profiles/" + gpus[0] +
                                     ".yaml: gpu: profile is "
                                     "for '" +
                                     gpus[0] + "' but the cluster's GPU is '" + gpus[1] + "'"});
}

}  // namespace
}  // namespace sextant::sim
