// `sextant fit-profile`: the profile's free parameters fitted on measured
// engine runs (engine/calibration/profile_fit.h), written into a copy of the profile as its
// `fit:` block. A subcommand of its own beside `sextant calibrate` (which
// measures the kernels): calibrate, run --compare on a set of layouts, fit.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/compute/prediction_interval.h"
#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/gpu_preset_name.h"
#include "sim/core/preset_catalog.h"
#include "engine/calibration/profile_fit.h"
#include "tools/commands.h"
#include "tools/run_cluster.h"
#include "tools/run_compare.h"

namespace sextant::tools {

namespace {

struct FitOptions {
  std::string runs_dir;
  std::string profile;
  std::string out;
  std::string cluster = "dgx-h100";
  bool power_cap = false;
};

std::string read_file(const std::string& path, const std::string& option) {
  std::ifstream in(path);
  if (!in) throw sim::ConfigError({{option, 0, 0, "", "cannot read '" + path + "'"}});
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every *.json of `dir`: one `run --compare --format json` output each;
// `files` gets their paths, in the same order.
std::vector<CompareReport> read_runs(const std::string& dir, std::vector<std::string>& files) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw sim::ConfigError({{"--runs", 0, 0, "", "'" + dir + "' is not a folder"}});
  files.clear();
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  std::vector<CompareReport> runs;
  for (const std::string& file : files) {
    const std::string text = read_file(file, "--runs");
    // The last line holding a JSON object (progress may precede it in a log).
    std::istringstream lines(text);
    std::string line, last;
    while (std::getline(lines, line))
      if (!line.empty() && line.front() == '{') last = line;
    nlohmann::json j = nlohmann::json::parse(last.empty() ? text : last, nullptr, false);
    if (j.is_discarded()) throw sim::ConfigError({{file, 0, 0, "", "not JSON"}});
    runs.push_back(compare_from_json(j.contains("compare") ? j["compare"] : j, file));
    // The fit's model is one GPU's step as the sum of its tasks (engine/calibration/profile_fit.h);
    // a run over several GPUs also waits on its collectives and pipeline
    // bubbles, which the fit would fold into compute_time_factor.
    const long long gpus = runs.back().parallel_layout.total_gpus();
    if (gpus > 1)
      throw sim::ConfigError({{file, 0, 0, "layout",
                               runs.back().layout + " trained on " + std::to_string(gpus) +
                                   " GPUs; fit-profile fits one-GPU runs (the step as the sum of one GPU's "
                                   "kernels, no communication): leave this run out of --runs"}});
  }
  return runs;
}

// What the fit needs of each run: its model (the preset it named, at its
// sequence length; an MoE run's measured expert load and capacity, as its
// `run --compare` predicted it), its layout and its measured step.
std::vector<engine::calibration::MeasuredStep> measured_steps(const sim::PresetCatalog& catalog,
                                                              const std::vector<CompareReport>& runs) {
  std::vector<engine::calibration::MeasuredStep> steps;
  for (const CompareReport& r : runs) {
    sim::ModelConfig m = catalog.model(r.model);
    m.seq_length = r.seq_length;
    if (m.moe) {
      if (r.expert_load_factor) m.moe->expert_load_factor = *r.expert_load_factor;
      m.moe->capacity_factor = r.capacity_factor;
    }
    steps.push_back({std::move(m), r.parallel_layout, r.step().measured_s});
  }
  return steps;
}

// The profile, the cluster and the runs must describe one GPU, as `simulate`
// requires of a profile and its cluster: a fit of H200 runs predicted on an
// H100 would fold the difference between the chips into the fitted factors.
// Every mismatch is said at once, with the cluster preset that has the GPU.
void check_one_gpu(const sim::PresetCatalog& catalog, const FitOptions& o, const sim::ClusterConfig& cluster,
                   const sim::CostProfile& profile, const std::vector<CompareReport>& runs,
                   const std::vector<std::string>& files) {
  const std::string& gpu = cluster.gpu.name;
  auto fix = [&](const std::string& wanted) {
    const std::string other = cluster_of_gpu(catalog, wanted);
    return other.empty() ? std::string("; give a --cluster whose GPU is ") + wanted
                         : "; give --cluster " + other + " (its GPU is " + wanted + ")";
  };
  std::vector<sim::Diagnostic> problems;
  if (profile.gpu != gpu)
    problems.push_back({"--cluster", 0, 0, "",
                        "'" + o.cluster + "' has GPU " + gpu + " but --profile " + o.profile + " is for " +
                            profile.gpu + fix(profile.gpu)});
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const CompareReport& run = runs[i];
    const std::string trained_on = run.device.empty() ? "" : sim::gpu_preset_name(run.device);
    if (!trained_on.empty() && trained_on != gpu)
      problems.push_back({files[i], 0, 0, "device",
                          "trained on " + run.device + " (" + trained_on + ") but --cluster " + o.cluster +
                              " has GPU " + gpu + fix(trained_on) + ", or leave this run out of --runs"});
  }
  sim::throw_if_any(problems);
}

int run_fit(const FitOptions& o, const CommonOptions& common, std::ostream& out) {
  const sim::PresetCatalog catalog(common.configs_dir);
  const sim::ClusterConfig cluster = catalog.cluster(o.cluster);
  const std::string profile_text = read_file(o.profile, "--profile");
  sim::CostProfile profile = sim::load_profile_text(profile_text, o.profile);
  std::vector<std::string> files;
  const std::vector<CompareReport> runs = read_runs(o.runs_dir, files);
  check_one_gpu(catalog, o, cluster, profile, runs, files);
  const std::vector<engine::calibration::MeasuredStep> steps = measured_steps(catalog, runs);
  engine::calibration::ProfileFitResult r = o.power_cap ? engine::calibration::fit_power_cap(profile, cluster, steps)
                                                        : engine::calibration::fit_profile(profile, cluster, steps);
  std::set<std::string> devices;
  for (const CompareReport& run : runs)
    if (!run.device.empty()) devices.insert(run.device);
  std::string on;
  for (const std::string& d : devices) on += (on.empty() ? " on " : ", ") + d;
  r.fit.data_set = o.runs_dir + " (" + std::to_string(runs.size()) + " engine runs" + on +
                   ", `sextant run --compare`)";

  const std::string text = engine::calibration::with_fit_block(profile_text, r.fit);
  sim::CostProfile fitted = sim::load_profile_text(text, o.out);  // what we write reads back
  {
    std::ofstream file(o.out);
    if (!file || !(file << text)) throw sim::ConfigError({{"--out", 0, 0, "", "cannot write '" + o.out + "'"}});
  }

  char line[256];
  out << "fit of " << profile.name << " (" << sim::to_string(profile.software) << ") on "
      << runs.size() << " runs of " << o.runs_dir << "\n";
  std::snprintf(line, sizeof line, "  %-12s %-34s %11s %11s %8s  %s\n", "model", "layout",
                "predicted", "measured", "error", "in 90 % interval");
  out << line;
  int inside = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto interval = sim::step_time_interval_s(r.predicted_s[i], fitted);
    const bool in = interval && r.measured_s[i] >= interval->first && r.measured_s[i] <= interval->second;
    inside += in ? 1 : 0;
    std::snprintf(line, sizeof line, "  %-12s %-34s %8.2f ms %8.2f ms %+7.2f%%  %s\n",
                  runs[i].model.c_str(), runs[i].layout.c_str(), r.predicted_s[i] * 1e3,
                  r.measured_s[i] * 1e3, 100 * (r.predicted_s[i] / r.measured_s[i] - 1),
                  in ? "yes" : "no");
    out << line;
  }
  out << "parameters:";
  for (const auto& [name, value] : r.fit.parameters) out << " " << name << " = " << value;
  const auto unit = sim::step_time_interval_s(1.0, fitted);
  std::snprintf(line, sizeof line,
                "\nlog_residual_sd %.4f: 90 %% interval x%.4f .. x%.4f of a prediction; "
                "%d of %zu runs inside\nwrote %s\n",
                r.fit.log_residual_sd, unit->first, unit->second, inside, runs.size(), o.out.c_str());
  out << line;
  return 0;
}

}  // namespace

CommandRunner add_fit_profile_command(CLI::App& app, const CommonOptions& common) {
  auto o = std::make_shared<FitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "fit-profile",
      "Fit a measured profile's free parameters (compute_time_factor, step_overhead_s,\n"
      "microbatch_overhead_s) on engine runs, by weighted least squares, and write the\n"
      "profile with its `fit:` block (the residual sd gives every prediction a 90 % interval).\n\n"
      "Example:\n"
      "  for l in mbs=1,gbs=8 mbs=4,gbs=8 ...; do\n"
      "    sextant run --model gpt-1.3b --layout $l --steps 10 --compare --format json \\\n"
      "        --profile measured.yaml > runs/$l.json; done\n"
      "  sextant fit-profile --runs runs --profile measured.yaml --out measured-fitted.yaml");
  cmd->add_option("--runs", o->runs_dir, "folder of `sextant run --compare --format json` outputs (*.json)")
      ->required();
  cmd->add_option("--profile", o->profile, "the measured profile to fit (YAML)")->required();
  cmd->add_option("--out", o->out, "where to write the fitted profile")->required();
  cmd->add_option("--cluster", o->cluster,
                  "cluster preset the runs' GPU belongs to: its GPU must be the profile's and the runs'")
      ->capture_default_str();
  cmd->add_flag("--power-cap", o->power_cap,
                "fit the power-cap model instead (one parameter, power_cap_hfu: the HFU at the calibrated\n"
                "burst clock above which the sustained clock falls as HFU^(-1/3); sim/compute/power_cap.h)");
  return [o, &common](std::ostream& out) { return run_fit(*o, common, out); };
}

}  // namespace sextant::tools
