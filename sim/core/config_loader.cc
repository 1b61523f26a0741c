#include "sim/core/config_loader.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <vector>

#include "sim/core/profile_tables_loader.h"
#include "sim/core/strict_yaml.h"
#include "sim/core/text_format.h"

namespace sextant::sim {

namespace {

// Reads the text of `path`, or records why it cannot.
std::optional<std::string> read_text(const std::string& path, std::vector<Diagnostic>& diags) {
  std::ifstream in(path);
  if (!in) {
    diags.push_back({path, 0, 0, "", "cannot open file (does it exist and is it readable?)"});
    return std::nullopt;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Parses `text` and hands its top-level mapping to `read`; throws all diagnostics.
template <typename Result, typename Reader>
Result load(const std::string& text, const std::string& file, Reader&& read) {
  std::vector<Diagnostic> diags;
  Result result{};
  if (auto root = parse_yaml_text(text, file, diags)) {
    if (!root->IsMap()) {
      diags.push_back(diagnostic_at(*root, file, "", "expected a mapping of key: value"));
    } else {
      StrictMap map(*root, file, diags);
      result = read(map);
    }
  }
  throw_if_any(std::move(diags));
  return result;
}

template <typename Result>
Result load_file(const std::string& path, Result (*from_text)(const std::string&,
                                                              const std::string&)) {
  std::vector<Diagnostic> diags;
  auto text = read_text(path, diags);
  throw_if_any(std::move(diags));
  return from_text(*text, path);
}

// Sizes are stored as int; anything above 2^30 is a typo, not a model.
constexpr std::int64_t kLargestSize = std::int64_t{1} << 30;

// An optional size, checked before it is narrowed to int (0 when bad).
int bounded_positive_int(StrictMap& map, std::string_view key, std::int64_t value) {
  if (value < 1) {
    map.report(key, "must be positive, got " + std::to_string(value));
    return 0;
  }
  if (value > kLargestSize) {
    map.report(key, "is implausibly large (" + std::to_string(value) + ")");
    return 0;
  }
  return static_cast<int>(value);
}

int positive_int(StrictMap& map, std::string_view key) {
  const std::int64_t value = map.required_int(key);
  if (!map.has(key) || map.has_error(key)) return 0;
  map.require_positive(key, static_cast<double>(value));
  if (value > kLargestSize) {
    map.report(key, "is implausibly large (" + std::to_string(value) + ")");
    return 0;
  }
  return value > 0 ? static_cast<int>(value) : 0;
}

// A preset's name (or the GPU a cluster names) as it will appear in tables, JSON and CSV.
std::string checked_name(StrictMap& map, std::string_view key) {
  std::string name = map.required_string(key);
  if (!map.has(key) || map.has_error(key)) return name;
  if (const std::string problem = name_problem(name); !problem.empty()) map.report(key, problem);
  return name;
}

double positive_double(StrictMap& map, std::string_view key) {
  const double value = map.required_double(key);
  map.require_positive(key, value);
  return value;
}

double fraction(StrictMap& map, std::string_view key) {
  const double value = map.required_double(key);
  map.require_in_range(key, value, 1e-3, 1.0);
  return value;
}

}  // namespace

ModelConfig load_model_text(const std::string& text, const std::string& file) {
  return load<ModelConfig>(text, file, [&](StrictMap& map) {
    ModelConfig m;
    m.name = checked_name(map, "name");
    m.num_layers = positive_int(map, "num_layers");
    m.hidden_size = positive_int(map, "hidden_size");
    m.ffn_hidden_size = positive_int(map, "ffn_hidden_size");
    m.num_attention_heads = positive_int(map, "num_attention_heads");
    m.num_query_groups = m.num_attention_heads;
    if (auto groups = map.optional_int("num_query_groups")) {
      m.num_query_groups = bounded_positive_int(map, "num_query_groups", *groups);
      if (m.num_query_groups > 0 && m.num_attention_heads % m.num_query_groups != 0) {
        map.report("num_query_groups", "must divide num_attention_heads (" +
                                           std::to_string(m.num_attention_heads) + "), got " +
                                           std::to_string(*groups));
      }
    }
    if (auto channels = map.optional_int("kv_channels")) {
      m.kv_channels = bounded_positive_int(map, "kv_channels", *channels);
    } else if (m.num_attention_heads > 0) {
      if (m.hidden_size % m.num_attention_heads != 0) {
        map.report("num_attention_heads",
                   "must divide hidden_size (" + std::to_string(m.hidden_size) +
                       ") unless kv_channels is given, got " +
                       std::to_string(m.num_attention_heads));
      }
      m.kv_channels = static_cast<int>(m.hidden_size / m.num_attention_heads);
    }
    m.vocab_size = positive_int(map, "vocab_size");
    m.seq_length = positive_int(map, "seq_length");
    const std::string activation = map.required_string("activation");
    if (activation == "gelu") m.activation = Activation::kGelu;
    else if (activation == "swiglu") m.activation = Activation::kSwiglu;
    else if (activation == "squared_relu") m.activation = Activation::kSquaredRelu;
    else if (map.has("activation")) map.report("activation", "got '" + activation + "'; accepted: gelu, swiglu, squared_relu");
    const std::string norm = map.required_string("normalization");
    if (norm == "layernorm") m.normalization = Normalization::kLayerNorm;
    else if (norm == "rmsnorm") m.normalization = Normalization::kRmsNorm;
    else if (map.has("normalization")) map.report("normalization", "got '" + norm + "'; accepted: layernorm, rmsnorm");
    m.tie_embeddings = map.optional_bool("tie_embeddings").value_or(false);
    if (auto pos = map.optional_string("position_embedding_type")) {
      if (*pos == "learned_absolute") m.position_embedding = PositionEmbedding::kLearnedAbsolute;
      else if (*pos == "rope") m.position_embedding = PositionEmbedding::kRope;
      else map.report("position_embedding_type", "got '" + *pos + "'; accepted: learned_absolute, rope");
    }
    m.add_bias_linear = map.optional_bool("add_bias_linear").value_or(true);
    m.add_qkv_bias = map.optional_bool("add_qkv_bias").value_or(false);
    if (auto window = map.optional_int("sliding_window")) {
      // 0 is "no window", as in the HF configs that write sliding_window: null.
      if (*window != 0) m.sliding_window = bounded_positive_int(map, "sliding_window", *window);
    }
    m.rotary_base = map.optional_double("rotary_base").value_or(10000.0);
    map.require_in_range("rotary_base", m.rotary_base, 1.0, 1e9);
    m.hidden_dropout = map.optional_double("hidden_dropout").value_or(0.1);
    map.require_in_range("hidden_dropout", m.hidden_dropout, 0.0, 0.99);
    m.attention_dropout = map.optional_double("attention_dropout").value_or(0.1);
    map.require_in_range("attention_dropout", m.attention_dropout, 0.0, 0.99);
    map.optional_string("source");
    StrictMap moe = map.child("moe");
    if (moe.is_map()) {
      MoeConfig e;
      e.num_experts = positive_int(moe, "num_experts");
      e.router_topk = positive_int(moe, "router_topk");
      if (e.router_topk > e.num_experts && e.num_experts > 0) {
        moe.report("router_topk", "must be at most num_experts (" +
                                      std::to_string(e.num_experts) + "), got " +
                                      std::to_string(e.router_topk));
      }
      e.ffn_hidden_size = positive_int(moe, "ffn_hidden_size");
      e.shared_expert_ffn_hidden_size =
          moe.optional_int("shared_expert_ffn_hidden_size").value_or(0);
      moe.require_in_range("shared_expert_ffn_hidden_size",
                           static_cast<double>(e.shared_expert_ffn_hidden_size), 0, 1e9);
      const std::int64_t first_dense = moe.optional_int("first_dense_layers").value_or(0);
      if (m.num_layers > 0) {
        moe.require_in_range("first_dense_layers", static_cast<double>(first_dense), 0,
                             m.num_layers - 1);
      }
      e.first_dense_layers =
          first_dense >= 0 && first_dense < m.num_layers ? static_cast<int>(first_dense) : 0;
      e.capacity_factor = moe.optional_double("capacity_factor").value_or(0.0);
      moe.require_in_range("capacity_factor", e.capacity_factor, 0.0,
                           static_cast<double>(std::max(e.num_experts, 1)));
      e.expert_load_factor = moe.optional_double("expert_load_factor").value_or(1.0);
      // Below 1 the busiest rank runs fewer rows than it routes: only a capacity drops them.
      moe.require_in_range("expert_load_factor", e.expert_load_factor, e.capacity_factor > 0 ? 0.01 : 1.0,
                           static_cast<double>(std::max(e.num_experts, 1)));
      moe.finish({"num_experts", "router_topk", "ffn_hidden_size", "shared_expert_ffn_hidden_size",
                  "first_dense_layers", "capacity_factor", "expert_load_factor"});
      m.moe = e;
    }
    StrictMap mla = map.child("mla");
    if (mla.is_map()) {
      // Multi-head latent attention (model_config.h: MlaConfig). Its heads are
      // qk_nope + qk_rope wide and every head has its own keys and values, so
      // kv_channels and num_query_groups are derived, not given.
      MlaConfig a;
      const std::int64_t q_rank = mla.optional_int("q_lora_rank").value_or(0);
      if (q_rank != 0) a.q_lora_rank = bounded_positive_int(mla, "q_lora_rank", q_rank);
      a.kv_lora_rank = positive_int(mla, "kv_lora_rank");
      a.qk_nope_head_dim = positive_int(mla, "qk_nope_head_dim");
      a.qk_rope_head_dim = positive_int(mla, "qk_rope_head_dim");
      a.v_head_dim = positive_int(mla, "v_head_dim");
      mla.finish({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                  "v_head_dim"});
      for (std::string_view key : {"kv_channels", "num_query_groups"}) {
        if (map.has(key)) {
          map.report(key, "is derived under mla (kv_channels = qk_nope_head_dim + "
                          "qk_rope_head_dim, num_query_groups = num_attention_heads); remove it");
        }
      }
      if (m.sliding_window > 0) {
        map.report("sliding_window", "is not modelled together with mla; remove one of them");
      }
      m.mla = a;
      m.kv_channels = a.qk_nope_head_dim + a.qk_rope_head_dim;
      m.num_query_groups = m.num_attention_heads;
    }
    map.finish({"name", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                "num_query_groups", "kv_channels", "vocab_size", "seq_length", "activation",
                "normalization", "tie_embeddings", "position_embedding_type", "add_bias_linear",
                "add_qkv_bias", "sliding_window",
                "rotary_base", "hidden_dropout", "attention_dropout", "moe", "mla", "source"});
    return m;
  });
}

ModelConfig load_model_file(const std::string& path) {
  return load_file<ModelConfig>(path, &load_model_text);
}

GpuConfig load_gpu_text(const std::string& text, const std::string& file) {
  return load<GpuConfig>(text, file, [&](StrictMap& map) {
    GpuConfig g;
    g.name = checked_name(map, "name");
    StrictMap peak = map.child("peak_flops_per_s");
    if (map.check_required("peak_flops_per_s", "a mapping of bf16, fp8, fp32") && peak.is_map()) {
      g.peak_bf16_flops_per_s = positive_double(peak, "bf16");
      g.peak_fp32_flops_per_s = positive_double(peak, "fp32");
      g.peak_fp8_flops_per_s = peak.optional_double("fp8").value_or(0.0);
      peak.require_positive("fp8", g.peak_fp8_flops_per_s);
      peak.finish({"bf16", "fp8", "fp32"});
    }
    const std::int64_t memory = map.required_int("memory_bytes");
    map.require_positive("memory_bytes", static_cast<double>(memory));
    g.memory_bytes = memory;
    g.memory_bandwidth_bytes_per_s = positive_double(map, "memory_bandwidth_bytes_per_s");
    g.sm_count = positive_int(map, "sm_count");
    g.compute_capability = map.optional_double("compute_capability").value_or(0.0);
    map.require_positive("compute_capability", g.compute_capability);
    g.source = map.required_string("source");
    map.finish({"name", "peak_flops_per_s", "memory_bytes", "memory_bandwidth_bytes_per_s",
                "sm_count", "compute_capability", "source"});
    return g;
  });
}

GpuConfig load_gpu_file(const std::string& path) {
  return load_file<GpuConfig>(path, &load_gpu_text);
}

ClusterFile load_cluster_text(const std::string& text, const std::string& file) {
  return load<ClusterFile>(text, file, [&](StrictMap& map) {
    ClusterFile out;
    ClusterConfig& c = out.cluster;
    c.name = checked_name(map, "name");
    out.gpu_name = checked_name(map, "gpu");
    c.gpus_per_node = positive_int(map, "gpus_per_node");
    c.num_nodes = positive_int(map, "num_nodes");
    c.intra_node_bandwidth_bytes_per_s = positive_double(map, "intra_node_bandwidth_bytes_per_s");
    c.inter_node_bandwidth_bytes_per_s = positive_double(map, "inter_node_bandwidth_bytes_per_s");
    c.intra_node_latency_s = map.required_double("intra_node_latency_s");
    map.require_in_range("intra_node_latency_s", c.intra_node_latency_s, 0, 1e-3);
    c.inter_node_latency_s = map.required_double("inter_node_latency_s");
    map.require_in_range("inter_node_latency_s", c.inter_node_latency_s, 0, 1e-3);
    c.source = map.required_string("source");
    map.finish({"name", "gpu", "gpus_per_node", "num_nodes", "intra_node_bandwidth_bytes_per_s",
                "inter_node_bandwidth_bytes_per_s", "intra_node_latency_s",
                "inter_node_latency_s", "source"});
    return out;
  });
}

ClusterFile load_cluster_file(const std::string& path) {
  return load_file<ClusterFile>(path, &load_cluster_text);
}

CostProfile load_profile_text(const std::string& text, const std::string& file) {
  return load<CostProfile>(text, file, [&](StrictMap& map) {
    CostProfile p;
    p.name = checked_name(map, "name");
    p.gpu = checked_name(map, "gpu");
    p.gemm_efficiency = fraction(map, "gemm_efficiency");
    p.fp8_gemm_efficiency = fraction(map, "fp8_gemm_efficiency");
    p.gemm_tile_m = positive_int(map, "gemm_tile_m");
    p.gemm_tile_n = positive_int(map, "gemm_tile_n");
    p.gemm_k_half = map.required_double("gemm_k_half");
    map.require_in_range("gemm_k_half", p.gemm_k_half, 0, 1e5);
    p.flash_attention_forward_efficiency = fraction(map, "flash_attention_forward_efficiency");
    p.flash_attention_backward_efficiency = fraction(map, "flash_attention_backward_efficiency");
    p.flash_attention_half_efficiency_tiles =
        map.required_double("flash_attention_half_efficiency_tiles");
    map.require_in_range("flash_attention_half_efficiency_tiles",
                         p.flash_attention_half_efficiency_tiles, 0, 1e7);
    p.sustained_compute_fraction = fraction(map, "sustained_compute_fraction");
    p.memory_efficiency = fraction(map, "memory_efficiency");
    p.kernel_overhead_s = map.required_double("kernel_overhead_s");
    map.require_in_range("kernel_overhead_s", p.kernel_overhead_s, 0, 1e-3);
    p.nvlink_efficiency = fraction(map, "nvlink_efficiency");
    p.collective_launch_s = map.required_double("collective_launch_s");
    map.require_in_range("collective_launch_s", p.collective_launch_s, 0, 1e-2);
    p.network_efficiency = fraction(map, "network_efficiency");
    p.source = map.required_string("source");
    read_measured_profile_part(map, p);
    std::vector<std::string_view> accepted{
        "name", "gpu", "gemm_efficiency", "fp8_gemm_efficiency", "gemm_tile_m",
        "gemm_tile_n", "gemm_k_half", "flash_attention_forward_efficiency",
        "flash_attention_backward_efficiency", "flash_attention_half_efficiency_tiles",
        "sustained_compute_fraction", "memory_efficiency", "kernel_overhead_s",
        "nvlink_efficiency", "collective_launch_s", "network_efficiency", "source"};
    for (std::string_view key : measured_profile_keys()) accepted.push_back(key);
    map.finish(accepted);
    return p;
  });
}

CostProfile load_profile_file(const std::string& path) {
  return load_file<CostProfile>(path, &load_profile_text);
}

namespace {

// One enumerated `behaviour:` key: absent keeps `value` (Megatron-Core's).
template <typename Enum>
void read_choice(StrictMap& map, std::string_view key, Enum& value,
                 std::optional<Enum> (*parse)(std::string_view), const char* accepted) {
  const auto text = map.optional_string(key);
  if (!text) return;
  if (const auto parsed = parse(*text)) value = *parsed;
  else map.report(key, "got '" + *text + "'; accepted: " + accepted);
}

FrameworkBehaviour read_behaviour(StrictMap map) {
  FrameworkBehaviour b;
  if (!map.is_map()) return b;
  read_choice(map, "pipeline_exchange", b.pipeline_exchange, &parse_pipeline_exchange,
              "batched, sequential");
  read_choice(map, "cross_entropy", b.cross_entropy, &parse_cross_entropy_kernel,
              "unfused, fused");
  read_choice(map, "gradient_accumulation", b.gradient_accumulation,
              &parse_gradient_accumulation, "in-weight-gradient-gemm, separate-pass");
  map.finish({"pipeline_exchange", "cross_entropy", "gradient_accumulation"});
  return b;
}

// A `supports:` list of names (`schedules: [1f1b, gpipe]`): absent keeps
// `values` (every value); each name must be one of `all`'s (to_string).
template <typename Enum, std::size_t N>
void read_names(StrictMap& map, std::string_view key, std::vector<Enum>& values,
                const std::array<Enum, N>& all) {
  const YAML::Node node = map.value(key);
  if (!node.IsDefined()) return;
  std::string accepted;
  for (Enum e : all) accepted += (accepted.empty() ? "" : ", ") + std::string(to_string(e));
  if (!node.IsSequence()) {
    map.report(key, "expected a list, e.g. [" + std::string(to_string(all[0])) + "]; accepted values: " + accepted);
    return;
  }
  values.clear();
  for (const YAML::Node& item : node) {
    const std::string name = item.IsScalar() ? item.Scalar() : "";
    const auto found = std::find_if(all.begin(), all.end(), [&](Enum e) { return to_string(e) == name; });
    if (found == all.end()) {
      map.report(key, "got '" + name + "'; accepted: " + accepted);
      return;
    }
    values.push_back(*found);
  }
}

void read_max_zero(StrictMap& map, std::string_view key, int& value) {
  if (const auto zero = map.optional_int(key)) {
    if (*zero < 0 || *zero > 3) map.report(key, "got " + std::to_string(*zero) + "; accepted: 0-3");
    else value = static_cast<int>(*zero);
  }
}

FrameworkSupport read_support(StrictMap map) {
  FrameworkSupport s;
  if (!map.is_map()) return s;
  auto flag = [&](std::string_view key, bool& value) {
    if (const auto given = map.optional_bool(key)) value = *given;
  };
  if (map.has("interleaved_schedule")) {
    map.value("interleaved_schedule");  // read: reported here, not again as unknown
    map.report("interleaved_schedule", "replaced by schedules: (a list of 1f1b, 1f1b-interleaved, gpipe, zb-h1)");
  }
  read_names(map, "schedules", s.schedules,
             std::array{Schedule::kOneFOneB, Schedule::kInterleaved, Schedule::kGpipe, Schedule::kZeroBubbleH1});
  read_names(map, "precisions", s.precisions, std::array{Precision::kBf16, Precision::kFp16, Precision::kFp8});
  read_names(map, "fsdp", s.fsdp,
             std::array{FsdpImplementation::kMegatronFsdp, FsdpImplementation::kFsdp2,
                        FsdpImplementation::kDeepSpeedZero3});
  flag("flash_attention", s.flash_attention);
  flag("sequence_parallel", s.sequence_parallel);
  flag("selective_recompute", s.selective_recompute);
  flag("overlap_grad_reduce", s.overlap_grad_reduce);
  flag("overlap_param_gather", s.overlap_param_gather);
  flag("tp_comm_overlap", s.tp_comm_overlap);
  flag("context_parallel", s.context_parallel);
  flag("expert_parallel", s.expert_parallel);
  flag("uneven_pipeline_split", s.uneven_pipeline_split);
  read_max_zero(map, "max_zero_without_pipeline", s.max_zero_without_pipeline);
  read_max_zero(map, "max_zero_with_pipeline", s.max_zero_with_pipeline);
  map.finish({"schedules", "precisions", "fsdp", "flash_attention",
              "sequence_parallel", "selective_recompute", "overlap_grad_reduce", "overlap_param_gather",
              "tp_comm_overlap", "context_parallel", "expert_parallel", "uneven_pipeline_split",
              "max_zero_without_pipeline", "max_zero_with_pipeline"});
  return s;
}

}  // namespace

Framework load_framework_text(const std::string& text, const std::string& file) {
  return load<Framework>(text, file, [&](StrictMap& map) {
    Framework f;
    f.name = map.required_string("name");
    f.description = map.required_string("description");
    if (map.has("sustained_compute_fraction")) {
      f.sustained_compute_fraction = fraction(map, "sustained_compute_fraction");
    }
    f.behaviour = read_behaviour(map.child("behaviour"));
    f.supports = read_support(map.child("supports"));
    f.source = map.required_string("source");
    map.finish({"name", "description", "sustained_compute_fraction", "behaviour", "supports",
                "source"});
    return f;
  });
}

Framework load_framework_file(const std::string& path) {
  return load_file<Framework>(path, &load_framework_text);
}

}  // namespace sextant::sim
