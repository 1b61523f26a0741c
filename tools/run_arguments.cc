#include "tools/run_arguments.h"

#include <filesystem>
#include <string>
#include <utility>

#include "engine/training/engine_support.h"
#include "sim/core/gpu_preset_name.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/preset_catalog.h"
#include "tools/run_cluster.h"
#include "tools/run_layout.h"
#ifdef SEXTANT_HAVE_ENGINE
#include <cuda_runtime_api.h>

#include "engine/calibration/device_info.h"
#endif

namespace sextant::tools {

namespace {

// The profile --compare and --layout best predict with: --profile, or the
// GPU's measured profile when one is committed, or its datasheet profile.
sim::CostProfile run_profile(const sim::PresetCatalog& catalog, const std::string& configs_dir,
                             const std::string& given, const std::string& gpu) {
  if (!given.empty()) return catalog.profile(given, gpu);
  const std::filesystem::path measured =
      std::filesystem::path(configs_dir) / "profiles" / "measured" / (gpu + ".yaml");
  return catalog.profile(std::filesystem::exists(measured) ? measured.string() : "", gpu);
}

// The GPU this process trains on: its CUDA name and its preset ("" for both
// without the engine or a GPU; the preset "" for a GPU no preset describes).
std::pair<std::string, std::string> this_gpu() {
#ifdef SEXTANT_HAVE_ENGINE
  if (engine::calibration::cuda_device_count() > 0) {
    int device = 0;
    cudaGetDevice(&device);
    const engine::calibration::DeviceInfo d = engine::calibration::device_info(device);
    return {d.name, sim::gpu_preset_name(d.name, d.memory_bytes)};
  }
#endif
  return {"", ""};
}

// --moe-router-*: the score function, and DeepSeek-V3's expert bias where it can run.
void check_moe_router(RunSettings& s) {
  if (s.moe_score_function == "sigmoid")
    s.moe.score_function = kernels::MoeScoreFunction::kSigmoid;
  else if (s.moe_score_function == "softmax")
    s.moe.score_function = kernels::MoeScoreFunction::kSoftmax;
  else
    throw_option_error("--moe-router-score-function", "", "'" + s.moe_score_function + "': accepted: softmax, sigmoid");
  s.moe.expert_bias_update_rate = 0.0;
  if (!s.moe_expert_bias) return;
  constexpr const char* kFlag = "--moe-router-enable-expert-bias";
  if (!s.model.moe)
    throw_option_error(kFlag, "", "model " + s.model.name + " has no MoE layers (no router to bias)");
  if (s.moe.score_function != kernels::MoeScoreFunction::kSigmoid)
    throw_option_error(kFlag, "",
                       "DeepSeek-V3's expert bias needs --moe-router-score-function sigmoid (the router is softmax)");
  if (s.moe_bias_update_rate <= 0)
    throw_option_error("--moe-router-bias-update-rate", "",
                       "0: the biases would never move; leave out " + std::string(kFlag) + " instead");
  s.moe.expert_bias_update_rate = s.moe_bias_update_rate;
}

}  // namespace

RunSettings checked_settings(const RunArguments& a, const std::string& configs_dir) {
  RunSettings s = a.settings;
  s.configs_dir = configs_dir;
  const sim::PresetCatalog catalog(configs_dir);
  s.model = catalog.model(a.model, a.seq_length);
  s.model_argument = a.model;
  engine::training::refuse_unexecuted_model(s.model);
  if (a.gpus != 1)
    throw_option_error("--gpus", "", std::to_string(a.gpus) + ": `sextant run` trains on one GPU so far; accepted: 1");
  const bool best = a.layout == "best";
  if (s.compare || best || !s.report_dir.empty()) {
    const auto [device_name, gpu_preset] = this_gpu();
    const RunCluster chosen = run_cluster(catalog, a.cluster, device_name, gpu_preset);
    s.cluster = catalog.cluster(chosen.name);
    s.cluster_note = chosen.note;
    s.profile = run_profile(catalog, configs_dir, a.profile, s.cluster.gpu.name);
  }
  if (!s.report_dir.empty()) s.compare = true;
  s.layout = run_layout(best ? best_layout(s.model, s.cluster, s.profile, a.world_size, a.global_batch, s.layout_note)
                                : a.layout,
                           a.world_size, a.global_batch);
  if (const sim::SplitProblem problem = sim::check_pipeline_split(s.model, s.layout); problem != sim::SplitProblem::kNone)
    throw_option_error("--layout", sim::split_problem_knob(problem), sim::split_problem_message(problem, s.model, s.layout));
  // --compare measures the step untimed and the tasks in a pass of their own
  // after it (time_tasks_apart, every rank of every layout, pipelines included):
  // per-task events would slow the step they time (issue 27).
  engine::training::check_tensor_parallel_split(s.model, s.layout.tp);
  engine::training::check_expert_parallel_split(s.model, s.layout.ep);
  engine::training::check_context_parallel_split(s.model, s.layout);
  if (s.steps < 1) throw_option_error("--steps", "", std::to_string(s.steps) + ": at least 1");
  if (s.log_interval < 1) throw_option_error("--log-interval", "", "at least 1");
  if (s.format != "table" && s.format != "json")
    throw_option_error("--format", "", "'" + s.format + "': accepted: table, json");
  if (!s.timing_file.empty()) s.time_tasks = true;
  if (s.save_interval > 0 && s.save_dir.empty())
    throw_option_error("--save-interval", "", std::to_string(s.save_interval) + ": needs --save DIR");
  const auto policy = engine::parse_nonfinite_policy(s.on_nonfinite_text);
  if (!policy) throw_option_error("--on-nonfinite", "", "'" + s.on_nonfinite_text + "': accepted: stop, skip");
  s.on_nonfinite = *policy;
  if (s.moe_grouped_gemm == "cublas-grouped")
    s.moe.gemm_backend = kernels::MoeGemmBackend::kCublasGrouped;
  else if (s.moe_grouped_gemm == "cublaslt-loop")
    s.moe.gemm_backend = kernels::MoeGemmBackend::kCublasLtLoop;
  else if (s.moe_grouped_gemm != "auto")
    throw_option_error("--moe-grouped-gemm", "", "'" + s.moe_grouped_gemm +
                                                     "': accepted: auto, cublas-grouped, cublaslt-loop");
  check_moe_router(s);
  // A model file's moe.capacity_factor is the run's unless --moe-capacity-factor says otherwise.
  if (s.model.moe && s.moe.capacity_factor == 0.0) s.moe.capacity_factor = s.model.moe->capacity_factor;
  return s;
}

}  // namespace sextant::tools
