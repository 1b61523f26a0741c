#include "tools/planning_inputs.h"

#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"

namespace sextant::tools {

PlanningInputs load_planning_inputs(const std::string& configs_dir, const PlanningArguments& a) {
  const sim::PresetCatalog catalog(configs_dir);
  PlanningInputs in;
  in.model = catalog.model(a.model);
  if (a.seq_length > 0) in.model.seq_length = a.seq_length;
  in.cluster = catalog.cluster(a.cluster);
  in.profile = catalog.profile(a.profile, in.cluster.gpu.name);
  if (!a.framework.empty()) in.profile = sim::with_framework(in.profile, catalog.framework(a.framework));
  in.layout = sim::parse_layout(a.layout);
  if (a.global_batch > 0) {
    if (in.layout.gbs && *in.layout.gbs != a.global_batch) {
      throw sim::ConfigError({{"--global-batch", 0, 0, "",
                               "is " + std::to_string(a.global_batch) + " but --layout says gbs=" +
                                   std::to_string(*in.layout.gbs)}});
    }
    in.layout.gbs = a.global_batch;
  }
  if (!in.layout.gbs) {
    throw sim::ConfigError(
        {{"--global-batch", 0, 0, "",
          "the global batch is needed: give --global-batch N or gbs=N in --layout"}});
  }
  return in;
}

void add_planning_options(CLI::App& cmd, PlanningArguments& a, bool presets_required) {
  CLI::Option* model = cmd.add_option(
      "--model", a.model,
      "model preset name (configs/models), a model YAML, or a HuggingFace config.json");
  CLI::Option* cluster = cmd.add_option(
      "--cluster", a.cluster, "cluster preset name (configs/clusters) or a cluster YAML");
  if (presets_required) {
    model->required();
    cluster->required();
  } else {
    model->capture_default_str();
    cluster->capture_default_str();
  }
  cmd.add_option("--layout", a.layout,
                 "comma-separated knob=value list; knobs left out are searched:\n"
                 "tp, pp, vpp, dp, cp, ep, etp, mbs, gbs, sp (0|1), recompute (none|selective|full),\n"
                 "dist_opt (0|1), zero (0-3), schedule (1f1b|1f1b-interleaved|gpipe|zb-h1),\n"
                 "precision (bf16|fp16|fp8; default bf16), attention (flash|unfused; default flash),\n"
                 "overlap_grad_reduce, overlap_param_gather, tp_comm_overlap (0|1),\n"
                 "fsdp (megatron-fsdp|fsdp2|deepspeed-zero3; with zero=3, default megatron-fsdp)");
  cmd.add_option("--global-batch", a.global_batch,
                 "global batch in sequences (same as gbs= in --layout)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--seq-length", a.seq_length, "training sequence length (overrides the model's)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--profile", a.profile,
                 "cost profile YAML (default: configs/profiles/<gpu>.yaml)");
  cmd.add_option("--framework", a.framework,
                 "training software whose sustained compute rate to assume (configs/frameworks):\n"
                 "megatron-core-0.8 (Megatron-LM's 2024 H100 runs), nemo-24.07 (NeMo's FP8\n"
                 "performance recipes), megatron-lm-2021 (Narayanan et al. 2021 on A100);\n"
                 "default: the profile's own (Megatron-Core 0.8 for the datasheet profiles)");
}

void check_gpu_count(long gpus, const sim::ClusterConfig& cluster) {
  if (gpus > cluster.total_gpus()) {
    throw sim::ConfigError({{"--gpus", 0, 0, "",
                             std::to_string(gpus) + " GPUs asked for; cluster '" + cluster.name +
                                 "' has " + std::to_string(cluster.total_gpus())}});
  }
}

}  // namespace sextant::tools
