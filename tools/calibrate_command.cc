// `sextant calibrate`: measure the engine's own kernels on this machine's GPU
// and write the measured cost profile (PROFILE_SCHEMA) for `simulate --profile`.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/calibration/calibration_shapes.h"
#include "engine/calibration/derived_scalars.h"
#include "engine/calibration/measured_profile.h"
#include "engine/calibration/profile_writer.h"
#include "sim/core/config_error.h"
#include "sim/core/gpu_preset_name.h"
#include "sim/core/preset_catalog.h"
#include "tools/commands.h"

#ifdef SEXTANT_HAVE_ENGINE
#include "engine/calibration/calibration_run.h"
#include "engine/calibration/device_info.h"
#endif

namespace sextant::tools {

namespace {

namespace cal = engine::calibration;

// The models whose layer shapes every profile covers (issue 12): the GPT-3
// family the engine is benchmarked on and a Llama-family model.
[[maybe_unused]] const std::vector<std::string> kDefaultModels = {"gpt-350m", "gpt-1.3b", "gpt-2.7b", "gpt-6.7b", "llama3-8b"};

struct CalibrateArguments {
  std::string out;
  bool quick = false;
  int device = 0;
  std::vector<std::string> models;
  std::string format = "table";
  std::string gpu;  // preset override
  std::vector<std::string> argv;
};

[[noreturn]] void option_error(const std::string& option, const std::string& message) {
  throw sim::ConfigError({{option, 0, 0, "", message}});
}

void check_arguments(const CalibrateArguments& a) {
  if (a.format != "table" && a.format != "json")
    option_error("--format", "'" + a.format + "': accepted: table, json");
  if (a.device < 0) option_error("--device", std::to_string(a.device) + ": a CUDA device index, 0 or more");
  const std::filesystem::path out(a.out);
  if (a.out.empty() || out.filename().empty()) option_error("--out", "'" + a.out + "': give a file path, e.g. h100.yaml");
  const std::filesystem::path folder = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec))
    option_error("--out", "'" + a.out + "': folder '" + folder.string() + "' does not exist");
  if (::access(folder.c_str(), W_OK) != 0)
    option_error("--out", "'" + a.out + "': folder '" + folder.string() + "' is not writable");
}

[[maybe_unused]] std::vector<sim::ModelConfig> load_models(const CalibrateArguments& a, const sim::PresetCatalog& catalog) {
  std::vector<std::string> names = kDefaultModels;
  for (const std::string& m : a.models)
    if (std::find(names.begin(), names.end(), m) == names.end()) names.push_back(m);
  std::vector<sim::ModelConfig> models;
  for (const std::string& n : names) models.push_back(catalog.model(n));
  return models;
}

[[maybe_unused]] std::string summary(const cal::MeasuredProfile& p, const std::string& out, const std::string& format) {
  std::size_t elementwise = 0;
  for (const cal::ElementwiseTable& t : p.elementwise) elementwise += t.points.size();
  const std::size_t nccl = p.nccl.all_reduce.size() + p.nccl.reduce_scatter.size() + p.nccl.all_gather.size() +
                           p.nccl.all_to_all.size() + p.nccl.send_recv.size();
  const auto grouped_query = std::count_if(p.attention.begin(), p.attention.end(),
                                           [](const cal::AttentionPoint& a) { return a.kv_heads < a.heads; });
  const cal::ProfileScalars& s = p.scalars;
  if (format == "json") {
    nlohmann::ordered_json j;
    j["profile"] = out;
    j["name"] = p.name;
    j["gpu"] = p.gpu;
    j["gpu_name"] = p.measurement.gpu_name;
    j["duration_s"] = std::stod(p.measurement.duration_s);
    j["points"] = {{"linear_bf16", p.linear_bf16.size()}, {"attention", p.attention.size()},
                   {"attention_grouped_query", grouped_query},
                   {"elementwise", elementwise}, {"nccl", nccl}};
    j["gemm_efficiency"] = s.gemm_efficiency.value;
    j["flash_attention_forward_efficiency"] = s.flash_attention_forward_efficiency.value;
    j["flash_attention_backward_efficiency"] = s.flash_attention_backward_efficiency.value;
    j["memory_efficiency"] = s.memory_efficiency.value;
    j["kernel_overhead_s"] = s.kernel_overhead_s.value;
    return j.dump(2) + "\n";
  }
  std::ostringstream t;
  t << "wrote " << out << " (" << p.name << ", " << p.measurement.gpu_name << ", " << p.measurement.duration_s
    << " s)\n"
    << "  points: " << p.linear_bf16.size() << " linear layers (x" << cal::kLinearProducts << " GEMMs: 3 plain, 5 with fused epilogues), " << p.attention.size()
    << " attention (" << grouped_query << " grouped-query), " << elementwise << " element-wise, " << nccl
    << " NCCL\n"
    << "  gemm_efficiency " << s.gemm_efficiency.value << ", flash attention forward "
    << s.flash_attention_forward_efficiency.value << " / backward " << s.flash_attention_backward_efficiency.value
    << ", memory " << s.memory_efficiency.value << ", kernel overhead " << s.kernel_overhead_s.value * 1e6
    << " us\n"
    << "  use it: sextant simulate --profile " << out << " --model gpt-1.3b --cluster dgx-h100 --gpus 1\n";
  return t.str();
}

#ifdef SEXTANT_HAVE_ENGINE
// The NVLink bandwidth of the first cluster preset built from this GPU, for
// nvlink_efficiency; 0 when none is.
double link_bandwidth_of(const std::string& gpu, const std::string& configs_dir, const sim::PresetCatalog& catalog) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(configs_dir) / "clusters", ec))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const sim::ClusterConfig c = catalog.cluster(f.string());
    if (c.gpu.name == gpu) return c.intra_node_bandwidth_bytes_per_s;
  }
  return 0;
}

int run_calibrate(const CalibrateArguments& a, const std::string& configs_dir, std::ostream& out) {
  check_arguments(a);
  const sim::PresetCatalog catalog(configs_dir);
  const std::vector<sim::ModelConfig> models = load_models(a, catalog);
  const int count = cal::cuda_device_count();
  if (count == 0) option_error("sextant calibrate", "no CUDA GPU found");
  if (a.device >= count)
    option_error("--device", std::to_string(a.device) + ": this machine has " + std::to_string(count) +
                                 " GPU(s), devices 0.." + std::to_string(count - 1));
  const cal::DeviceInfo info = cal::device_info(a.device);
  const std::string gpu = a.gpu.empty() ? sim::gpu_preset_name(info.name, info.memory_bytes) : a.gpu;
  if (gpu.empty())
    option_error("--gpu", "no GPU preset under configs/gpus describes '" + info.name +
                              "'; name the closest with --gpu (h100-sxm-80gb, h200-sxm-141gb, a100-sxm-80gb)");
  cal::DerivationInputs inputs;
  inputs.gpu = catalog.gpu(gpu);
  inputs.datasheet_profile_path = "configs/profiles/" + gpu + ".yaml";
  inputs.datasheet_profile = catalog.profile("", gpu);
  inputs.link_bandwidth_bytes_per_s = link_bandwidth_of(gpu, configs_dir, catalog);

  cal::CalibrationSettings settings;
  settings.device = a.device;
  settings.quick = a.quick;
  settings.progress = true;
  std::string command;
  for (const std::string& arg : a.argv) command += (command.empty() ? "" : " ") + arg;
  settings.command_line = command;
  const cal::CalibrationPlan plan = cal::plan_calibration(models, {a.quick});
  cal::MeasuredProfile p = cal::run_calibration(plan, settings, std::cerr);
  p.name = gpu + "-measured";
  p.gpu = gpu;
  p.source = "sextant calibrate on " + std::to_string(count) + " x " + info.name + ", " + p.measurement.date +
             ", commit " + p.measurement.commit + (a.quick ? " (--quick)" : "") +
             ": the engine's kernels measured point by point";
  p.scalars = cal::derive_scalars(p, inputs);
  cal::write_file_atomically(a.out, cal::profile_yaml(p));
  out << summary(p, a.out, a.format);
  return 0;
}
#else
int run_calibrate(const CalibrateArguments& a, const std::string&, std::ostream&) {
  check_arguments(a);
  throw sim::ConfigError({{"sextant calibrate", 0, 0, "",
                           "this sextant was built without the CUDA toolkit, so it cannot measure the "
                           "engine's kernels; calibrate needs the CUDA build (see README)"}});
}
#endif

}  // namespace

CommandRunner add_calibrate_command(CLI::App& app, const CommonOptions& common, int argc, char** argv) {
  auto a = std::make_shared<CalibrateArguments>();
  for (int i = 0; i < argc; ++i) a->argv.emplace_back(i == 0 ? "sextant" : argv[i]);
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure what sextant's engine runs on this machine's GPU and write a measured cost\n"
      "profile for `sextant simulate --profile FILE`: the engine's cuBLASLt linear layers\n"
      "(forward, input and weight gradient) at the layer shapes of the model presets for\n"
      "tp 1/2/4/8 and micro-batches 1-8 plus a log-spaced grid, its flash attention forward and\n"
      "backward at the presets' heads and key/value heads plus a grid of sequences 512-32768,\n"
      "head dims 64/128, multi-head and grouped-query (4 and 8 query heads per key/value head),\n"
      "each norm/activation/RoPE/embedding/cross-entropy/AdamW/gradient-norm/\n"
      "bias-gradient/residual kernel over a grid of sizes, launch and CUDA-graph overheads,\n"
      "and, with more than one GPU, NCCL collectives by message and group size.\n"
      "Every point is a median of CUDA-event timings after warm-up, inputs rotated over more\n"
      "than twice the L2; the profile records the GPU, driver, CUDA, cuBLAS and NCCL\n"
      "versions, the commit, date, command and method. About 4 minutes on an H200 (--quick:\n"
      "under 2). A progress bar goes to stderr; the file is written only at the\n"
      "end (a temporary file renamed), so an interrupted run leaves the old one.\n\n"
      "Examples:\n"
      "  sextant calibrate --out configs/profiles/measured/h100-sxm-80gb.yaml\n"
      "  sextant calibrate --out /tmp/quick.yaml --quick --format json\n"
      "  sextant calibrate --out my.yaml --model configs/models/my-model.yaml --device 1\n"
      "  sextant simulate --profile configs/profiles/measured/h100-sxm-80gb.yaml \\\n"
      "      --model gpt-1.3b --cluster dgx-h100 --gpus 1 --layout mbs=4,gbs=4");
  cmd->add_option("--out", a->out, "the profile YAML to write (its folder must exist)")->required();
  cmd->add_flag("--quick", a->quick,
                "a subset in under 2 minutes on an H200: micro-batches 1, 2, 4, 8 and coarser grids (for a check, "
                "not for the committed profile)");
  cmd->add_option("--device", a->device, "the CUDA device to measure (NCCL uses GPUs 0..n-1)")
      ->capture_default_str();
  cmd->add_option("--model", a->models,
                  "also measure this model's layer shapes (preset name or YAML; repeatable); always "
                  "measured: gpt-350m, gpt-1.3b, gpt-2.7b, gpt-6.7b, llama3-8b");
  cmd->add_option("--gpu", a->gpu,
                  "the GPU preset (configs/gpus) this device is, when its name does not say "
                  "(e.g. h100-sxm-80gb)");
  cmd->add_option("--format", a->format, "the summary printed at the end: table or json")->capture_default_str();
  return [a, &common](std::ostream& out) { return run_calibrate(*a, common.configs_dir, out); };
}

}  // namespace sextant::tools
