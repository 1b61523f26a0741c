#include "tools/planning_inputs.h"

#include <vector>

#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"
#include "tools/numeric_option.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

namespace {

// --model and --cluster are what is planned for: never assumed (a default
// would answer for a job the user did not name), both said at once when missing.
void require_model_and_cluster(const PlanningArguments& a) {
  std::vector<sim::Diagnostic> missing;
  if (a.model.empty())
    missing.push_back({"--model", 0, 0, "",
                       "required: a model preset name, a model YAML or a HuggingFace config.json "
                       "(`sextant presets` lists the presets, e.g. --model gpt3-175b)"});
  if (a.cluster.empty())
    missing.push_back({"--cluster", 0, 0, "",
                       "required: a cluster preset name or a cluster YAML "
                       "(`sextant presets` lists the presets, e.g. --cluster dgx-a100)"});
  sim::throw_if_any(missing);
}

}  // namespace

PlanningInputs load_planning_inputs(const std::string& configs_dir, const PlanningArguments& a) {
  require_model_and_cluster(a);
  const sim::PresetCatalog catalog(configs_dir);
  PlanningInputs in;
  in.model = catalog.model(a.model, a.seq_length);
  in.cluster = catalog.cluster(a.cluster);
  if (a.nodes > 0) in.cluster.num_nodes = static_cast<int>(a.nodes);
  in.profile = catalog.profile(a.profile, in.cluster.gpu.name);
  in.layout = sim::parse_layout(a.layout);
  if (!a.framework.empty()) {
    const sim::Framework framework = catalog.framework(a.framework);
    in.profile = sim::with_framework(in.profile, framework);
    sim::restrict_to_framework(in.layout, framework, "--layout");
  }
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

SimulationContext simulation_context(const PlanningInputs& in, const PlanningArguments& a,
                                     long gpus, const std::string& engine) {
  SimulationContext c{in.model.name, in.cluster.name, in.cluster.gpu.name, gpus,
                      static_cast<double>(in.cluster.gpu.memory_bytes), engine};
  c.mfu_convention = a.mfu == "causal" ? MfuConvention::kCausal : MfuConvention::kMegatron;
  c.causal_flops_fraction = sim::causal_flops_fraction(in.model);
  c.profile = &in.profile;
  return c;
}

void add_planning_options(CLI::App& cmd, PlanningArguments& a) {
  cmd.add_option("--model", a.model,
                 "required: model preset name (configs/models; `sextant presets` lists them), a\n"
                 "model YAML, or a HuggingFace config.json");
  cmd.add_option("--cluster", a.cluster,
                 "required: cluster preset name (configs/clusters; `sextant presets` lists them)\n"
                 "or a cluster YAML");
  cmd.add_option("--layout", a.layout,
                 "comma-separated knob=value list; knobs left out are searched:\n"
                 "tp, pp, vpp, dp, cp, ep, etp, mbs, gbs, sp (0|1), recompute (none|selective|full),\n"
                 "dist_opt (0|1), zero (0-3), schedule (1f1b|1f1b-interleaved|gpipe|zb-h1),\n"
                 "precision (bf16|fp16|fp8; default bf16), attention (flash|unfused; default flash),\n"
                 "overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, moe_a2a_overlap,\n"
                 "moe_shared_expert_overlap (0|1),\n"
                 "fsdp (megatron-fsdp|fsdp2|deepspeed-zero3; with zero=3, default megatron-fsdp);\n"
                 "pipeline split (left out: searched, starting from the even split where it exists):\n"
                 "first_stage_layers, last_stage_layers (N), embedding_in_split, loss_in_split (0|1),\n"
                 "or pp_layout (Megatron's --pipeline-model-parallel-layout without commas:\n"
                 "virtual stages split by '|', E embedding, t layer, L loss, x*n, (...)*n;\n"
                 "e.g. pp_layout=Et*3|(t*4|)*6t*3L)");
  add_whole_number_option(cmd, "--global-batch", a.global_batch,
                          "global batch in sequences (same as gbs= in --layout)", 1, kLargestBatch);
  add_whole_number_option(cmd, "--seq-length", a.seq_length,
                          "training sequence length (overrides the model's; required for a\n"
                          "HuggingFace config.json that does not give its pretraining length)",
                          1, kLongestSequence);
  add_whole_number_option(cmd, "--nodes", a.nodes,
                          "size the cluster preset to N nodes (default: the preset's num_nodes)", 1,
                          kMostGpus);
  cmd.add_option("--mfu", a.mfu,
                 "attention FLOPs MFU counts: megatron (every query against all s keys, as\n"
                 "Megatron-LM and published MFU figures do) or causal (only the scores a causal\n"
                 "mask keeps: about half the attention FLOPs); JSON gives both either way")
      ->check(CLI::IsMember({"megatron", "causal"}))
      ->capture_default_str();
  cmd.add_option("--profile", a.profile,
                 "cost profile YAML (default: configs/profiles/<gpu>.yaml)");
  cmd.add_option("--framework", a.framework,
                 "training software (configs/frameworks): what it runs and supports (the search\n"
                 "completes --layout only with that) and its sustained compute rate:\n"
                 "megatron-core-0.8 (Megatron-LM's 2024 H100 runs), megatron-core-0.12 (its 2025\n"
                 "Llama examples), nemo-24.07 (NeMo's FP8 performance recipes), megatron-lm-2021\n"
                 "(Narayanan et al. 2021), megatron-lm-2022 (Korthikanti et al. 2022: SP, selective\n"
                 "recompute), deepspeed-pipe-2021 (DeepSpeed's pipeline engine, MT-NLG/BLOOM);\n"
                 "default: the profile's own (Megatron-Core 0.8 for the datasheet profiles)");
}

void check_gpu_count(long gpus, const sim::ClusterConfig& cluster) {
  if (gpus > cluster.total_gpus()) {
    const long nodes = (gpus + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
    throw sim::ConfigError({{"--gpus", 0, 0, "",
                             std::to_string(gpus) + " GPUs asked for; cluster '" + cluster.name +
                                 "' has " + std::to_string(cluster.total_gpus()) + " (" +
                                 std::to_string(cluster.num_nodes) + " nodes of " +
                                 std::to_string(cluster.gpus_per_node) + "); give --nodes " +
                                 std::to_string(nodes) + " to size it"}});
  }
}

}  // namespace sextant::tools
