#include "reports/validation_cases.h"

#include <fstream>
#include <algorithm>
#include <cctype>
#include <sstream>
#include <string_view>
#include <utility>

#include "reports/case_recipe.h"
#include "reports/validation_groups.h"
#include "sim/core/config_error.h"
#include "sim/core/gpu_preset_name.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/strict_yaml.h"

namespace sextant::reports {

using sim::Diagnostic;
using sim::StrictMap;

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Latest year (2010..2039) the source text names as a word of four digits:
// its publication or commit date.
int source_year(const std::string& source) {
  auto digit = [&](std::size_t i) {
    return i < source.size() && std::isdigit(static_cast<unsigned char>(source[i]));
  };
  int latest = 0;
  for (std::size_t i = 0; i + 4 <= source.size(); ++i) {
    if (digit(i - 1) || !digit(i) || !digit(i + 1) || !digit(i + 2) || !digit(i + 3) ||
        digit(i + 4)) {
      continue;  // not exactly four digits (i − 1 wraps to npos at the start: not a digit)
    }
    const int year = std::stoi(source.substr(i, 4));
    if (year >= 2010 && year <= 2039) latest = std::max(latest, year);
  }
  return latest;
}

std::optional<int> optional_count(StrictMap& map, std::string_view key) {
  auto value = map.optional_int(key);
  if (value && *value < 1) map.report(key, "must be a positive integer");
  return value ? std::optional<int>(static_cast<int>(*value)) : std::nullopt;
}

ValidationCase read_case(StrictMap& c) {
  ValidationCase out;
  out.id = c.required_string("id");
  out.gpu = c.required_string("gpu");
  out.cluster_preset = cluster_for_gpu(out.gpu);
  if (out.cluster_preset.empty() && c.has("gpu")) {
    c.report("gpu", "unknown GPU '" + out.gpu +
                        "'; accepted: A100-SXM4-80GB, H100-SXM-80GB, H200-SXM-141GB");
  }
  out.num_gpus = static_cast<long>(c.required_int("num_gpus"));
  if (c.has("num_gpus") && !c.has_error("num_gpus") && out.num_gpus < 1) {
    c.report("num_gpus", "must be positive, got " + std::to_string(out.num_gpus));
  }
  const std::string source = c.optional_string("source").value_or("");
  const std::string notes = c.optional_string("notes").value_or("");
  out.source_group = source_group(source);
  out.framework = framework_of(source);

  StrictMap model = c.child("model");
  sim::ModelConfig& m = out.model;
  m.name = out.id;
  m.num_layers = static_cast<int>(model.required_int("layers"));
  m.hidden_size = model.required_int("hidden");
  m.ffn_hidden_size = model.required_int("ffn_hidden");
  m.num_attention_heads = static_cast<int>(model.required_int("heads"));
  m.num_query_groups =
      static_cast<int>(model.optional_int("kv_heads").value_or(m.num_attention_heads));
  m.kv_channels = m.num_attention_heads > 0
                      ? static_cast<int>(m.hidden_size / m.num_attention_heads)
                      : 0;
  m.vocab_size = model.required_int("vocab");
  m.seq_length = model.required_int("seq_len");
  if (m.num_layers < 1 || m.hidden_size < 1 || m.ffn_hidden_size < 1 ||
      m.num_attention_heads < 1 || m.vocab_size < 1 || m.seq_length < 1) {
    c.report("model", "layers, hidden, ffn_hidden, heads, vocab and seq_len must be positive");
  }
  apply_architecture(model_family_of(out.id, source), m);
  if (auto experts = model.optional_int("num_experts")) {
    sim::MoeConfig e;
    e.num_experts = static_cast<int>(*experts);
    e.router_topk = static_cast<int>(model.required_int("topk"));
    e.ffn_hidden_size = model.required_int("moe_ffn_hidden");
    m.moe = e;
  } else {
    for (const char* key : {"topk", "moe_ffn_hidden"}) {
      if (model.optional_int(key)) model.report(key, "is given without num_experts (a dense model)");
    }
  }
  model.optional_double("params_billion");  // the source's rounded size, for readers
  // A key the loader does not read would be silently ignored: refuse it instead.
  model.finish({"layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len",
                "num_experts", "topk", "moe_ffn_hidden", "params_billion"});

  StrictMap parallel = c.child("parallel");
  sim::PartialLayout& l = out.layout;
  l.tp = optional_count(parallel, "tp");
  l.pp = optional_count(parallel, "pp");
  l.vpp = optional_count(parallel, "vpp");
  l.dp = optional_count(parallel, "dp");
  l.cp = optional_count(parallel, "cp");
  l.ep = optional_count(parallel, "ep");
  l.sp = parallel.optional_bool("sp");
  // The pipeline split, where a case publishes it (Megatron's
  // --decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-
  // pipeline-split, --pipeline-model-parallel-layout); left out, the search picks it.
  l.first_stage_layers = optional_count(parallel, "first_stage_layers");
  l.last_stage_layers = optional_count(parallel, "last_stage_layers");
  l.embedding_in_split = parallel.optional_bool("embedding_in_split");
  l.loss_in_split = parallel.optional_bool("loss_in_split");
  if (auto text = parallel.optional_string("pp_layout")) {
    std::vector<std::string> stages;
    std::string error;
    if (sim::expand_pp_layout(*text, stages, error)) l.pp_layout = *text;
    else parallel.report("pp_layout", error);
  }
  bool zero_stated = false;
  if (auto zero = parallel.optional_string("zero")) {
    zero_stated = true;
    if (zero->find("distributed optimizer") != std::string::npos) l.zero = 1;
    else if (*zero == "0" || *zero == "1" || *zero == "2" || *zero == "3") l.zero = std::stoi(*zero);
    else parallel.report("zero", "got '" + *zero + "'; accepted: 0-3 or text naming the 'distributed optimizer'");
  } else {
    l.zero = 0;  // not stated: Megatron's default, no distributed optimizer
  }
  l.gbs = optional_count(c, "global_batch");
  if (!l.gbs) c.report("global_batch", "required key is missing");
  l.mbs = optional_count(c, "micro_batch");
  if (auto recompute = c.optional_string("recompute")) {
    if (starts_with(*recompute, "full")) l.recompute = sim::Recompute::kFull;
    else if (starts_with(*recompute, "selective")) l.recompute = sim::Recompute::kSelective;
    else if (starts_with(*recompute, "none")) l.recompute = sim::Recompute::kNone;
    else c.report("recompute", "got '" + *recompute + "'; accepted: text starting with full, selective or none");
  }
  const std::string precision = c.optional_string("precision").value_or("bf16");
  if (starts_with(precision, "fp8")) l.precision = sim::Precision::kFp8;
  else if (starts_with(precision, "fp16")) l.precision = sim::Precision::kFp16;
  else if (starts_with(precision, "bf16")) l.precision = sim::Precision::kBf16;
  else c.report("precision", "got '" + precision + "'; accepted: text starting with bf16, fp16 or fp8");

  if (follows_nemo_recipe(source)) {
    apply_nemo_recipe(l, zero_stated);
  } else {
    l.overlap_grad_reduce = notes.find("--overlap-grad-reduce") != std::string::npos;
    l.overlap_param_gather = notes.find("--overlap-param-gather") != std::string::npos;
    l.tp_comm_overlap = notes.find("--tp-comm-overlap") != std::string::npos;
  }
  const int year = source_year(source);
  l.attention = year > 0 && year < 2022 ? sim::AttentionKernel::kUnfused
                                        : sim::AttentionKernel::kFlash;

  StrictMap derived = c.child("derived");
  out.measured_step_time_s = derived.required_double("iteration_time_s");
  derived.require_positive("iteration_time_s", out.measured_step_time_s);
  return out;
}

}  // namespace

std::string cluster_for_gpu(const std::string& gpu) {
  // The DGX of each GPU preset (configs/clusters/dgx-*.yaml name it as their gpu).
  static constexpr std::pair<std::string_view, const char*> kDgxOf[] = {
      {"a100-sxm-80gb", "dgx-a100"}, {"h100-sxm-80gb", "dgx-h100"}, {"h200-sxm-141gb", "dgx-h200"}};
  const std::string preset = sim::gpu_preset_name(gpu);
  for (const auto& [gpu_preset, cluster] : kDgxOf)
    if (preset == gpu_preset) return cluster;
  return "";
}

std::vector<ValidationCase> load_validation_cases(const std::string& path) {
  std::vector<Diagnostic> diags;
  std::ifstream in(path);
  if (!in) {
    throw sim::ConfigError({{path, 0, 0, "", "cannot open file (does it exist and is it readable?)"}});
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<ValidationCase> cases;
  if (auto root = sim::parse_yaml_text(text.str(), path, diags)) {
    const YAML::Node list = root->IsMap() ? (*root)["cases"] : YAML::Node();
    if (!list.IsDefined() || !list.IsSequence()) {
      diags.push_back(sim::diagnostic_at(*root, path, "cases", "expected a list of cases"));
    } else {
      for (const YAML::Node& node : list) {
        StrictMap c(node, path, diags);
        if (!c.is_map()) {
          diags.push_back(sim::diagnostic_at(node, path, "cases", "each case must be a mapping"));
          continue;
        }
        cases.push_back(read_case(c));
      }
    }
  }
  sim::throw_if_any(std::move(diags));
  return cases;
}

}  // namespace sextant::reports
