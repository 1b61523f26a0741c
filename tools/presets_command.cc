// `sextant presets` (alias `list`): every preset under the configs folder, one
// line each, so a user can see what --model, --cluster and --profile accept.
#include <cstdio>
#include <memory>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "sim/memory/parameter_count.h"
#include "tools/commands.h"

namespace sextant::tools {

namespace {

std::string row(const std::string& name, const std::string& what) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "  %-24s %s\n", name.c_str(), what.c_str());
  return buffer;
}

std::string model_line(const sim::ModelConfig& m) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, "%.1f B parameters, %d layers, hidden %lld, %d heads",
                sim::total_params(m) / 1e9, m.num_layers, static_cast<long long>(m.hidden_size),
                m.num_attention_heads);
  std::string out = buffer;
  if (m.num_query_groups < m.num_attention_heads) {
    out += " (" + std::to_string(m.num_query_groups) + " KV groups)";
  }
  if (m.moe) {
    out += ", " + std::to_string(m.moe->num_experts) + " experts top-" +
           std::to_string(m.moe->router_topk);
  }
  if (m.mla) out += ", MLA kv_lora " + std::to_string(m.mla->kv_lora_rank);
  out += ", seq " + std::to_string(m.seq_length);
  if (m.sliding_window > 0) out += ", window " + std::to_string(m.sliding_window);
  return out;
}

std::string gpu_line(const sim::GpuConfig& g) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, "%.0f TFLOP/s bf16 dense%s, %.0f GiB, %.2f TB/s",
                g.peak_bf16_flops_per_s / 1e12,
                g.peak_fp8_flops_per_s > 0
                    ? (", " + std::to_string(static_cast<long>(g.peak_fp8_flops_per_s / 1e12)) +
                       " fp8")
                          .c_str()
                    : "",
                static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024),
                g.memory_bandwidth_bytes_per_s / 1e12);
  return buffer;
}

std::string cluster_line(const sim::ClusterConfig& c) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "%d nodes x %d %s (%lld GPUs; --nodes resizes), %.0f GB/s NVLink, %.0f GB/s "
                "network per GPU",
                c.num_nodes, c.gpus_per_node, c.gpu.name.c_str(),
                static_cast<long long>(c.total_gpus()), c.intra_node_bandwidth_bytes_per_s / 1e9,
                c.inter_node_bandwidth_bytes_per_s / 1e9);
  return buffer;
}

// The line for one preset, or why it does not load.
template <typename Describe>
std::string describe(const std::string& name, Describe&& d) {
  try {
    return row(name, d());
  } catch (const sim::ConfigError& e) {
    return row(name, std::string("(does not load: ") + e.what() + ")");
  }
}

int run_presets(const CommonOptions& common, std::ostream& out) {
  const sim::PresetCatalog catalog(common.configs_dir);
  out << "Presets in " << common.configs_dir << " (give the name, or a path to a .yaml file)\n";
  out << "\nmodels (--model; also a HuggingFace config.json or its folder)\n";
  for (const std::string& n : catalog.names("models")) {
    out << describe(n, [&] { return model_line(catalog.model(n)); });
  }
  out << "\ngpus (named by clusters)\n";
  for (const std::string& n : catalog.names("gpus")) {
    out << describe(n, [&] { return gpu_line(catalog.gpu(n)); });
  }
  out << "\nclusters (--cluster)\n";
  for (const std::string& n : catalog.names("clusters")) {
    out << describe(n, [&] { return cluster_line(catalog.cluster(n)); });
  }
  out << "\nprofiles (--profile; the default is the one named for the cluster's GPU)\n";
  for (const std::string& n : catalog.names("profiles")) {
    out << describe(n, [&] {
      const sim::CostProfile p =
          sim::load_profile_file(catalog.root() + "/profiles/" + n + ".yaml");
      // Enough of the source to tell a measured profile from an assumed one.
      const std::string source =
          p.source.size() > 90 ? p.source.substr(0, 87) + "..." : p.source;
      return "for " + p.gpu + "; " + source;
    });
  }
  out << "\nframeworks (--framework; the training software whose sustained compute rate to assume)\n";
  for (const std::string& n : catalog.names("frameworks")) {
    out << describe(n, [&] {
      const sim::Framework f = catalog.framework(n);
      char fraction[32] = "of the profile";
      if (f.sustained_compute_fraction) {
        std::snprintf(fraction, sizeof fraction, "%.2f", *f.sustained_compute_fraction);
      }
      const std::string what =
          f.description.size() > 80 ? f.description.substr(0, 77) + "..." : f.description;
      return std::string("sustained ") + fraction + "; " + what;
    });
  }
  return 0;
}

}  // namespace

CommandRunner add_presets_command(CLI::App& app, const CommonOptions& common) {
  CLI::App* cmd = app.add_subcommand(
      "presets", "List the model, GPU, cluster, cost-profile and framework presets, one line each.");
  cmd->alias("list");
  return [&common](std::ostream& out) { return run_presets(common, out); };
}

}  // namespace sextant::tools
