#include "sim/core/hf_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "sim/core/config_error.h"
#include "sim/core/nearest_name.h"
#include "sim/core/strict_json.h"
#include "sim/core/strict_yaml.h"
#include "sim/core/text_format.h"

namespace sextant::sim {

namespace {

// How an architecture builds its layers; config.json does not say this,
// transformers' modelling code does (see the table in hf_config.h).
enum class Family {
  kLlama,    // RMSNorm, RoPE, SiLU-gated MLP, no biases (Llama, Mistral, Mixtral, Qwen)
  kGpt2,     // LayerNorm, learned positions, GeLU MLP, biases; n_layer/n_embd/... keys
  kGptNeox,  // LayerNorm, RoPE, GeLU MLP, biases
};

enum class MoeKind {
  kNone,
  kMixtral,   // every layer routed; num_local_experts, experts as wide as intermediate_size
  kQwen2Moe,  // num_experts, moe_intermediate_size, one shared expert, layer pattern
  kQwen3Moe,  // as Qwen2-MoE without the shared expert
  kDeepseek,  // n_routed_experts, n_shared_experts as wide as a routed one, first_k_dense_replace
};

struct Architecture {
  std::string_view name;        // architectures[0]
  std::string_view model_type;  // used when the file has no architectures list
  Family family;
  MoeKind moe;
  bool tie_default;  // transformers' default tie_word_embeddings for this config class
};

constexpr std::array<Architecture, 11> kArchitectures = {{
    {"LlamaForCausalLM", "llama", Family::kLlama, MoeKind::kNone, false},
    {"MistralForCausalLM", "mistral", Family::kLlama, MoeKind::kNone, false},
    {"MixtralForCausalLM", "mixtral", Family::kLlama, MoeKind::kMixtral, false},
    {"Qwen2ForCausalLM", "qwen2", Family::kLlama, MoeKind::kNone, false},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::kLlama, MoeKind::kQwen2Moe, false},
    {"Qwen3ForCausalLM", "qwen3", Family::kLlama, MoeKind::kNone, false},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::kLlama, MoeKind::kQwen3Moe, false},
    // Multi-head latent attention (ModelConfig::mla) and DeepSeekMoE.
    {"DeepseekV2ForCausalLM", "deepseek_v2", Family::kLlama, MoeKind::kDeepseek, false},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::kLlama, MoeKind::kDeepseek, false},
    // GPT2Config leaves tie_word_embeddings at PretrainedConfig's default, true.
    {"GPT2LMHeadModel", "gpt2", Family::kGpt2, MoeKind::kNone, true},
    {"GPTNeoXForCausalLM", "gpt_neox", Family::kGptNeox, MoeKind::kNone, false},
}};

// transformers' ACT2FN names of GeLU and its approximations; they cost the same here.
constexpr std::array<std::string_view, 6> kGeluNames = {
    "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_accurate", "gelu_python"};

constexpr std::int64_t kImplausible = std::int64_t{1} << 30;

// Keys that change what the model computes. transformers ignores a key its
// config class does not define, so a Llama config carrying DeepSeek's
// kv_lora_rank loads as a dense Llama; sextant refuses it instead, naming the key.
struct StructuralKey {
  std::string_view key;
  std::string_view describes;
};
constexpr std::array<StructuralKey, 27> kStructuralKeys = {{
    {"sliding_window", "sliding-window attention"},
    {"use_sliding_window", "sliding-window attention"},
    {"max_window_layers", "sliding-window attention on some layers"},
    {"layer_types", "a per-layer choice of attention (e.g. sliding windows on some layers)"},
    {"attention_chunk_size", "chunked attention (Llama 4)"},
    {"attention_bias", "biases on the attention projections"},
    {"mlp_bias", "biases on the MLP projections"},
    {"num_local_experts", "a mixture of experts"},
    {"num_experts", "a mixture of experts"},
    {"n_routed_experts", "a mixture of experts (DeepSeek)"},
    {"n_shared_experts", "shared experts (DeepSeek)"},
    {"num_experts_per_tok", "a mixture of experts"},
    {"moe_intermediate_size", "a mixture of experts"},
    {"shared_expert_intermediate_size", "a shared expert"},
    {"decoder_sparse_step", "a mixture of experts on some layers"},
    {"mlp_only_layers", "a mixture of experts on some layers"},
    {"first_k_dense_replace", "a mixture of experts after leading dense layers (DeepSeek)"},
    {"moe_layer_freq", "a mixture of experts on some layers (DeepSeek)"},
    {"q_lora_rank", "multi-head latent attention (DeepSeek-V2/V3)"},
    {"kv_lora_rank", "multi-head latent attention (DeepSeek-V2/V3)"},
    {"qk_rope_head_dim", "multi-head latent attention (DeepSeek-V2/V3)"},
    {"qk_nope_head_dim", "multi-head latent attention (DeepSeek-V2/V3)"},
    {"v_head_dim", "multi-head latent attention (DeepSeek-V2/V3)"},
    {"num_nextn_predict_layers", "multi-token prediction layers (DeepSeek-V3)"},
    {"scoring_func", "a router scoring function (DeepSeek)"},
    {"n_group", "grouped, node-limited expert routing (DeepSeek)"},
    {"topk_group", "grouped, node-limited expert routing (DeepSeek)"},
}};

// Keys a config.json carries that do not change what one training step
// computes, moves or stores, so the simulation is the same with or without
// them: transformers' PretrainedConfig bookkeeping, token ids, generation
// defaults, numerical epsilons and initialisation, inference-time settings and
// training losses' coefficients. Every other key is either read (by the
// architecture's reader below), refused when it describes a model sextant does
// not represent (kStructuralKeys), or refused as unknown: a key nobody has
// looked at may change the model (issue 29).
constexpr std::array<std::string_view, 82> kKeysWithoutTrainingCost = {{
    // PretrainedConfig bookkeeping (transformers/configuration_utils.py)
    "transformers_version", "torch_dtype", "dtype", "use_cache", "auto_map",
    "_attn_implementation", "_attn_implementation_autoset", "attn_implementation", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "tokenizer_class", "finetuning_task", "id2label", "label2id", "problem_type", "prefix",
    // the checkpoint's storage format; training precision is the layout's precision knob
    "quantization_config",
    // token ids
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    // generation defaults (inference only)
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "task_specific_params",
    // numerical constants and initialisation: same kernels, same bytes
    "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "initializer_range",
    "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
    // Llama's pretraining_tp slices each linear layer's GEMM for exactness, same FLOPs
    "pretraining_tp",
    // context lengths: read where they give the training length (training_length)
    "max_position_embeddings", "n_positions", "n_ctx", "rope_scaling",
    // modelled approximately, as hf_config.h says: partial rotary, parallel
    // residual, embedding dropout
    "rotary_pct", "use_parallel_residual", "embd_pdrop",
    // GPT-2's sequence-summary head and NeoX's classifier: heads of other tasks, not the LM
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
    "summary_use_proj", "classifier_dropout",
    // router losses, normalisation and inference settings: a few element-wise
    // operations on (tokens, experts) scores beside the expert GEMMs. topk_method
    // names DeepSeek's selection rule; its node limit is topk_group, refused unless off.
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha",
    "seq_aux", "norm_topk_prob", "routed_scaling_factor", "topk_method", "ep_size",
}};

// Which of kStructuralKeys each architecture's config class reads (and the
// importer models or refuses by value).
bool reads_key(const Architecture& a, std::string_view key) {
  const std::string_view n = a.name;
  const bool qwen = n.substr(0, 4) == "Qwen";
  const bool qwen_moe = n == "Qwen2MoeForCausalLM" || n == "Qwen3MoeForCausalLM";
  if (n.substr(0, 8) == "Deepseek") {
    // num_nextn_predict_layers, scoring_func, n_group, topk_group: read, and
    // refused unless off (refuse_unmodelled_deepseek_routing).
    return key == "n_routed_experts" || key == "n_shared_experts" ||
           key == "num_experts_per_tok" || key == "moe_intermediate_size" ||
           key == "first_k_dense_replace" || key == "moe_layer_freq" || key == "q_lora_rank" ||
           key == "kv_lora_rank" || key == "qk_rope_head_dim" || key == "qk_nope_head_dim" ||
           key == "v_head_dim" || key == "num_nextn_predict_layers" || key == "scoring_func" ||
           key == "n_group" || key == "topk_group";
  }
  if (key == "attention_bias") return n == "LlamaForCausalLM" || n.substr(0, 5) == "Qwen3";
  if (key == "mlp_bias") return n == "LlamaForCausalLM";
  if (key == "sliding_window") return n == "MistralForCausalLM" || n == "MixtralForCausalLM" || qwen;
  if (key == "use_sliding_window" || key == "max_window_layers") return qwen;
  if (key == "num_local_experts") return n == "MixtralForCausalLM";
  if (key == "num_experts_per_tok") return n == "MixtralForCausalLM" || qwen_moe;
  if (key == "num_experts" || key == "moe_intermediate_size" || key == "decoder_sparse_step" ||
      key == "mlp_only_layers") {
    return qwen_moe;
  }
  if (key == "shared_expert_intermediate_size") return n == "Qwen2MoeForCausalLM";
  return false;
}

template <typename Names>
std::string join(const Names& names) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

int one_based(int zero_based) { return zero_based < 0 ? 0 : zero_based + 1; }

// Typed reads of the top-level object. StrictMap does the reading and the
// messages ("32", a string, or null where a number belongs is a type error);
// this records which keys were looked at, so that the others are refused.
class Reader {
 public:
  Reader(const YAML::Node& root, const std::string& file, std::vector<Diagnostic>& diags)
      : root_(root), file_(file), diags_(diags), map_(root, file, diags) {}

  StrictMap& map() { return map_; }
  const YAML::Node& root() const { return root_; }
  const std::string& file() const { return file_; }
  std::vector<Diagnostic>& diags() { return diags_; }

  /// The raw value at `key`; undefined when absent (never inserts).
  YAML::Node value(std::string_view key) const {
    asked_.insert(std::string(key));
    return root_[std::string(key)];
  }

  /// The keys a read looked at (present or not), for refuse_unknown_keys.
  const std::set<std::string, std::less<>>& asked() const { return asked_; }

  /// `primary` unless only `alias` is present (n_layer for num_hidden_layers, ...).
  std::string_view pick(std::string_view primary, std::string_view alias) const {
    return !map_.has(primary) && map_.has(alias) ? alias : primary;
  }

  // StrictMap refuses a JSON string ("32") where a number or boolean belongs.
  std::optional<std::int64_t> optional_int(std::string_view key) {
    asked_.insert(std::string(key));
    return map_.optional_int(key);
  }
  std::optional<double> optional_double(std::string_view key) {
    asked_.insert(std::string(key));
    return map_.optional_double(key);
  }
  std::optional<bool> optional_bool(std::string_view key) {
    asked_.insert(std::string(key));
    return map_.optional_bool(key);
  }
  std::optional<std::string> optional_string(std::string_view key) {
    asked_.insert(std::string(key));
    return map_.optional_string(key);
  }

  /// Missing, null or mistyped: a diagnostic and std::nullopt.
  std::optional<std::int64_t> required_int(std::string_view key) {
    asked_.insert(std::string(key));
    if (!map_.has(key)) {
      map_.required_int(key);  // reports it missing
      return std::nullopt;
    }
    if (value(key).IsNull()) {  // StrictMap::report would point at the object, not the null
      diags_.push_back(
          diagnostic_at(value(key), file_, std::string(key), "expected an integer, got null"));
      return std::nullopt;
    }
    return optional_int(key);
  }

  /// A required size: positive and at most 2^30, as the YAML loader checks;
  /// 0 after a diagnostic.
  std::int64_t positive_int(std::string_view key) {
    const std::optional<std::int64_t> v = required_int(key);
    if (v) check_positive(key, *v);
    return v.value_or(0);
  }

  void check_positive(std::string_view key, std::int64_t v) {
    map_.require_positive(key, static_cast<double>(v));
    if (v > kImplausible) map_.report(key, "is implausibly large (" + std::to_string(v) + ")");
  }

 private:
  const YAML::Node root_;
  const std::string& file_;
  std::vector<Diagnostic>& diags_;
  StrictMap map_;
  mutable std::set<std::string, std::less<>> asked_;
};

// Finds the architecture by architectures[0], else model_type; nullptr after
// reporting when it is missing or not one we know.
const Architecture* find_architecture(Reader& r) {
  const YAML::Node list = r.value("architectures");
  if (list.IsDefined() && !list.IsNull()) {
    if (!list.IsSequence() || list.size() == 0 || !list[0].IsScalar()) {
      r.diags().push_back(diagnostic_at(list, r.file(), "architectures",
                                        "expected a list of architecture names such as "
                                        "[\"LlamaForCausalLM\"]"));
      return nullptr;
    }
    if (list.size() > 1) {
      std::string names;
      for (const YAML::Node& item : list)
        names += (names.empty() ? "\"" : ", \"") + (item.IsScalar() ? item.Scalar() : "?") + "\"";
      r.diags().push_back(diagnostic_at(
          list, r.file(), "architectures",
          "lists " + std::to_string(list.size()) + " architectures (" + names +
              "); a config.json describes one model: keep the one to simulate (accepted: " +
              join(hf_supported_architectures()) + ")"));
      return nullptr;
    }
    const std::string name = list[0].Scalar();
    for (const Architecture& a : kArchitectures) {
      if (a.name != name) continue;
      // transformers picks the config class by model_type: another family's
      // would read other keys than this architecture's.
      if (auto type = r.optional_string("model_type"); type && *type != a.model_type) {
        r.map().report("model_type", "is '" + *type + "', but architectures names " + name +
                                         ", whose model_type is '" + std::string(a.model_type) +
                                         "'; make them agree");
        return nullptr;
      }
      return &a;
    }
    r.diags().push_back(diagnostic_at(list[0], r.file(), "architectures",
                                      "unsupported architecture '" + name + "'; accepted: " +
                                          join(hf_supported_architectures())));
    return nullptr;
  }
  if (auto type = r.optional_string("model_type")) {
    std::vector<std::string_view> types;
    for (const Architecture& a : kArchitectures) {
      if (a.model_type == *type) return &a;
      types.push_back(a.model_type);
    }
    r.map().report("model_type", "unsupported model_type '" + *type + "'; accepted: " +
                                     join(types));
    return nullptr;
  }
  r.map().report("architectures", "required key is missing (and there is no model_type); "
                                  "accepted: " + join(hf_supported_architectures()));
  return nullptr;
}

std::string model_name(Reader& r) {
  if (auto name = r.optional_string("_name_or_path"); name && !name->empty()) {
    if (const std::string problem = name_problem(*name); !problem.empty()) {
      r.map().report("_name_or_path", problem);
    }
    return *name;
  }
  const std::filesystem::path path(r.file());
  // Hub checkouts are <model>/config.json: the folder names the model.
  std::string name = path.stem().string();
  if (path.stem() == "config") {
    const std::string folder = path.parent_path().filename().string();
    if (!folder.empty() && folder != "." && folder != "..") name = folder;
  }
  if (const std::string problem = name_problem(name); !problem.empty()) {
    r.diags().push_back({r.file(), 0, 0, "_name_or_path",
                         "absent, and the name taken from the file's path " + problem +
                             "; give the model a name with _name_or_path"});
  }
  return name;
}

double dropout(Reader& r, std::string_view key, double fallback) {
  const double p = r.optional_double(key).value_or(fallback);
  r.map().require_in_range(key, p, 0.0, 0.99);
  return p;
}

// Qwen MoE: which layers are routed. Layer i has a dense MLP when it is listed
// in mlp_only_layers or (i+1) % decoder_sparse_step != 0 (Qwen2MoeDecoderLayer).
// Sets e.first_dense_layers; returns false when no layer is routed.
bool qwen_layer_pattern(Reader& r, int num_layers, MoeConfig& e) {
  const std::int64_t step = r.optional_int("decoder_sparse_step").value_or(1);
  if (r.map().has("decoder_sparse_step")) r.check_positive("decoder_sparse_step", step);
  if (num_layers <= 0 || num_layers > 1'000'000 || step <= 0) return true;  // reported already

  std::vector<bool> dense(static_cast<std::size_t>(num_layers), false);
  const YAML::Node only = r.value("mlp_only_layers");
  if (only.IsDefined() && !only.IsNull()) {
    if (!only.IsSequence()) {
      r.diags().push_back(diagnostic_at(only, r.file(), "mlp_only_layers",
                                        "expected a list of layer indices"));
    } else {
      for (const YAML::Node& item : only) {
        std::int64_t i = -1;
        if (!item.IsScalar() || is_quoted_scalar(item) ||
            !YAML::convert<std::int64_t>::decode(item, i) || i < 0 || i >= num_layers) {
          r.diags().push_back(diagnostic_at(
              item, r.file(), "mlp_only_layers",
              "expected a layer index in [0, " + std::to_string(num_layers - 1) + "], got " +
                  (item.IsScalar() ? "'" + item.Scalar() + "'" : std::string("a non-number"))));
          continue;
        }
        dense[static_cast<std::size_t>(i)] = true;
      }
    }
  }
  for (int i = 0; i < num_layers; ++i) {
    if ((i + 1) % step != 0) dense[static_cast<std::size_t>(i)] = true;
  }

  int leading = 0;
  while (leading < num_layers && dense[static_cast<std::size_t>(leading)]) ++leading;
  std::vector<int> interleaved;
  for (int i = leading; i < num_layers; ++i) {
    if (dense[static_cast<std::size_t>(i)]) interleaved.push_back(i);
  }
  if (!interleaved.empty()) {
    std::string layers;
    for (int i : interleaved) layers += (layers.empty() ? "" : ", ") + std::to_string(i);
    const char* key = step > 1 ? "decoder_sparse_step" : "mlp_only_layers";
    r.map().report(key, "dense layers " + layers + " come after MoE layer " +
                            std::to_string(leading) +
                            "; sextant represents only leading dense layers followed by MoE "
                            "layers (moe.first_dense_layers)");
  }
  e.first_dense_layers = leading;
  return leading < num_layers;
}

// DeepSeek-V2/V3 (DeepseekV3DecoderLayer): layer i is routed when i >=
// first_k_dense_replace and i % moe_layer_freq == 0; n_shared_experts shared
// experts, each moe_intermediate_size wide, run as one MLP of their summed
// width (the modelling code's DeepseekV3MLP with intermediate_size
// moe_intermediate_size · n_shared_experts).
void read_deepseek_layers(Reader& r, ModelConfig& m, MoeConfig& e) {
  const std::int64_t shared = r.optional_int("n_shared_experts").value_or(0);
  r.map().require_in_range("n_shared_experts", static_cast<double>(shared), 0, 1024);
  e.shared_expert_ffn_hidden_size = shared >= 0 && shared <= 1024 ? shared * e.ffn_hidden_size : 0;
  const std::int64_t first = r.optional_int("first_k_dense_replace").value_or(0);
  if (m.num_layers > 0) {
    r.map().require_in_range("first_k_dense_replace", static_cast<double>(first), 0,
                             m.num_layers - 1);
  }
  e.first_dense_layers = first >= 0 && first < m.num_layers ? static_cast<int>(first) : 0;
  const std::int64_t freq = r.optional_int("moe_layer_freq").value_or(1);
  if (freq != 1) {
    r.map().report("moe_layer_freq", "is " + std::to_string(freq) +
                                         ": dense layers between MoE layers are not modelled; "
                                         "sextant represents only leading dense layers followed "
                                         "by MoE layers (accepted: 1)");
  }
  m.moe = e;
}

// DeepSeek-V3's keys that change what is computed but that sextant does not
// model, refused by name rather than read and dropped (issue 29): its
// multi-token-prediction module (num_nextn_predict_layers extra transformer
// layers with their own projection and output head: FLOPs, weights, memory),
// sigmoid router scores, and node-limited routing (each token's experts drawn
// from topk_group of n_group groups, which bounds the expert all-to-all).
// Values that describe the modelled model are accepted: 0 MTP layers,
// softmax scores, topk_group = n_group (no limit). Keys left out are not
// guessed at.
void refuse_unmodelled_deepseek_routing(Reader& r) {
  if (const auto mtp = r.optional_int("num_nextn_predict_layers"); mtp && *mtp != 0)
    r.map().report("num_nextn_predict_layers",
                   "is " + std::to_string(*mtp) + ": multi-token prediction (extra transformer layers and "
                   "output heads) is not modelled; accepted: 0 (simulates the model without its MTP module)");
  if (const auto scoring = r.optional_string("scoring_func"); scoring && *scoring != "softmax")
    r.map().report("scoring_func", "is '" + *scoring + "': only softmax router scores are modelled; accepted: softmax");
  const auto groups = r.optional_int("n_group");
  const auto chosen = r.optional_int("topk_group");
  if (groups && chosen && *chosen < *groups)
    r.map().report("topk_group",
                   "is " + std::to_string(*chosen) + " of n_group " + std::to_string(*groups) +
                       ": node-limited routing (experts from at most topk_group groups, which bounds the "
                       "expert all-to-all) is not modelled; accepted: topk_group equal to n_group (no limit)");
}

// Multi-head latent attention keys (DeepSeek-V2/V3): q_lora_rank null means no
// query compression. A query/key head is qk_nope + qk_rope wide and every head
// has its own keys and values, whatever head_dim and num_key_value_heads say.
void read_mla(Reader& r, ModelConfig& m) {
  MlaConfig a;
  const YAML::Node q_rank = r.value("q_lora_rank");
  if (q_rank.IsDefined() && !q_rank.IsNull()) {
    a.q_lora_rank = r.optional_int("q_lora_rank").value_or(0);
    r.check_positive("q_lora_rank", a.q_lora_rank);
  }
  a.kv_lora_rank = r.positive_int("kv_lora_rank");
  a.qk_nope_head_dim = static_cast<int>(r.positive_int("qk_nope_head_dim"));
  a.qk_rope_head_dim = static_cast<int>(r.positive_int("qk_rope_head_dim"));
  a.v_head_dim = static_cast<int>(r.positive_int("v_head_dim"));
  m.mla = a;
  m.kv_channels = a.qk_nope_head_dim + a.qk_rope_head_dim;
  m.num_query_groups = m.num_attention_heads;
}

void read_moe(Reader& r, const Architecture& a, ModelConfig& m) {
  if (a.moe == MoeKind::kNone) return;
  MoeConfig e;
  const bool mixtral = a.moe == MoeKind::kMixtral;
  const char* experts_key = mixtral                      ? "num_local_experts"
                            : a.moe == MoeKind::kDeepseek ? "n_routed_experts"
                                                          : "num_experts";
  e.num_experts = static_cast<int>(r.positive_int(experts_key));
  e.router_topk = static_cast<int>(r.positive_int("num_experts_per_tok"));
  if (e.num_experts > 0 && e.router_topk > e.num_experts) {
    r.map().report("num_experts_per_tok", "must be at most " + std::string(experts_key) + " (" +
                                              std::to_string(e.num_experts) + "), got " +
                                              std::to_string(e.router_topk));
  }
  if (mixtral) {
    e.ffn_hidden_size = m.ffn_hidden_size;  // MixtralBlockSparseTop2MLP uses intermediate_size
    m.moe = e;
    return;
  }
  e.ffn_hidden_size = r.positive_int("moe_intermediate_size");
  if (a.moe == MoeKind::kDeepseek) {
    read_deepseek_layers(r, m, e);
    refuse_unmodelled_deepseek_routing(r);
    return;
  }
  if (a.moe == MoeKind::kQwen2Moe) {
    e.shared_expert_ffn_hidden_size =
        r.required_int("shared_expert_intermediate_size").value_or(0);
    r.map().require_in_range("shared_expert_intermediate_size",
                             static_cast<double>(e.shared_expert_ffn_hidden_size), 0,
                             static_cast<double>(kImplausible));
  }
  if (qwen_layer_pattern(r, m.num_layers, e)) m.moe = e;
}

void read_activation(Reader& r, const Architecture& a, ModelConfig& m) {
  if (a.family == Family::kLlama) {
    // The MLP is gated by construction; only a SiLU gate is SwiGLU.
    m.activation = Activation::kSwiglu;
    const std::string act = r.optional_string("hidden_act").value_or("silu");
    if (act != "silu" && act != "swish") {
      r.map().report("hidden_act", "got '" + act + "'; " + std::string(a.name) +
                                       " has a gated MLP and sextant models only the SiLU gate "
                                       "(SwiGLU); accepted: silu, swish");
    }
    return;
  }
  m.activation = Activation::kGelu;
  const char* key = a.family == Family::kGpt2 ? "activation_function" : "hidden_act";
  const std::string act =
      r.optional_string(key).value_or(a.family == Family::kGpt2 ? "gelu_new" : "gelu");
  bool known = false;
  for (std::string_view g : kGeluNames) known = known || act == g;
  if (!known) r.map().report(key, "got '" + act + "'; accepted: " + join(kGeluNames));
}

// "Off" values (null, false, 0, an empty list) describe nothing to misread.
bool is_off(const YAML::Node& v) {
  if (v.IsNull()) return true;
  if (v.IsMap()) return v.size() == 0;
  if (v.IsSequence()) {  // layer_types written out with every layer "full_attention"
    for (const YAML::Node& item : v) {
      if (!item.IsScalar() || item.Scalar() != "full_attention") return false;
    }
    return true;
  }
  return v.Scalar() == "false" || v.Scalar() == "0";
}

void refuse_keys_not_read(Reader& r, const Architecture& a) {
  for (const StructuralKey& k : kStructuralKeys) {
    const YAML::Node v = r.value(k.key);
    if (!v.IsDefined() || is_off(v) || reads_key(a, k.key)) continue;
    r.diags().push_back(diagnostic_at(
        v, r.file(), std::string(k.key),
        "describes " + std::string(k.describes) + ", which " + std::string(a.name) +
            " does not have (transformers would ignore the key and build a different model); "
            "sextant refuses rather than simulate that: fix architectures or remove the key"));
  }
}

// Every top-level key is read for this architecture, refused by name
// (kStructuralKeys), or known not to change the training cost
// (kKeysWithoutTrainingCost); any other is refused, listing the accepted ones,
// as the YAML loader refuses unknown keys (STYLE.md #5).
void refuse_unknown_keys(Reader& r, const Architecture& a) {
  const auto structural = [](std::string_view key) {
    return std::any_of(kStructuralKeys.begin(), kStructuralKeys.end(),
                       [&](const StructuralKey& k) { return k.key == key; });
  };
  std::set<std::string, std::less<>> read;  // what this architecture's reader looks at
  for (const std::string& key : r.asked())
    if (!structural(key) || reads_key(a, key)) read.insert(key);
  for (const StructuralKey& k : kStructuralKeys)
    if (reads_key(a, k.key)) read.insert(std::string(k.key));
  const auto known = [&](std::string_view key) {
    // A structural key the architecture does not read is refused by
    // refuse_keys_not_read unless it is off.
    return read.count(key) > 0 || structural(key) ||
           std::find(kKeysWithoutTrainingCost.begin(), kKeysWithoutTrainingCost.end(), key) !=
               kKeysWithoutTrainingCost.end();
  };
  std::vector<std::string> names(read.begin(), read.end());  // for "did you mean"
  for (std::string_view k : kKeysWithoutTrainingCost) names.emplace_back(k);
  for (const auto& entry : r.root()) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (known(key)) continue;
    r.diags().push_back(diagnostic_at(
        entry.first, r.file(), key,
        "unknown key" + did_you_mean(key, names) + ": " + std::string(a.name) +
            " reads no such key and it is not one known to "
        "leave the training cost unchanged, so sextant refuses rather than ignore it; accepted: " +
            join(read) + "; and, ignored as they change no cost: " +
            join(kKeysWithoutTrainingCost)));
  }
}

// The length to simulate. max_position_embeddings is the longest context a
// model supports, not the one it was trained at (131,072 for Llama 3.1,
// trained at 8,192), so a RoPE model takes rope_scaling's
// original_max_position_embeddings (its pretraining length, before the context
// was extended) or --seq-length; without either it is an error saying so.
// GPT-2's learned position table has exactly n_positions rows, all trained:
// n_positions is its training length.
std::int64_t training_length(Reader& r, const Architecture& a, std::string_view max_key,
                             std::int64_t seq_length_override) {
  if (seq_length_override > 0) return seq_length_override;
  if (seq_length_override < 0) return 0;  // reported as a bad --seq-length already
  if (a.family == Family::kGpt2) return r.positive_int(max_key);
  const YAML::Node scaling = r.value("rope_scaling");
  if (scaling.IsDefined() && scaling.IsMap() && scaling["original_max_position_embeddings"]) {
    const YAML::Node original = scaling["original_max_position_embeddings"];
    std::int64_t length = 0;
    if (original.IsScalar() && !is_quoted_scalar(original) &&
        YAML::convert<std::int64_t>::decode(original, length) && length > 0 &&
        length <= kImplausible) {
      return length;
    }
    r.diags().push_back(diagnostic_at(original, r.file(),
                                      "rope_scaling.original_max_position_embeddings",
                                      "expected a positive integer, got '" +
                                          (original.IsScalar() ? original.Scalar() : "a non-number") +
                                          "'"));
    return 0;
  }
  const std::string longest =
      r.map().has(max_key) && r.value(max_key).IsScalar()
          ? " (" + std::string(max_key) + " " + r.value(max_key).Scalar() + ")"
          : "";
  r.diags().push_back({"--seq-length", 0, 0, "",
                       "is required for " + r.file() + ": it gives the longest context the model "
                       "supports" + longest + ", not the length it was trained at (no "
                       "rope_scaling.original_max_position_embeddings); give --seq-length N, e.g. "
                       "--seq-length 4096"});
  return 0;
}

// Biases of the linear layers, by architecture (transformers' modelling code):
// Llama's attention_bias puts biases on q, k, v and o, mlp_bias on gate, up and
// down; Qwen2 and Qwen2-MoE always have q, k, v biases and no others; Qwen3's
// attention_bias is Llama's; Mistral and Mixtral have none; GPT-2 and GPT-NeoX
// have all. sextant represents all (add_bias_linear) or q, k, v only
// (add_qkv_bias); a mix beyond those is refused, not rounded.
void read_biases(Reader& r, const Architecture& a, ModelConfig& m) {
  m.add_bias_linear = a.family != Family::kLlama;
  m.add_qkv_bias = a.name == "Qwen2ForCausalLM" || a.name == "Qwen2MoeForCausalLM";
  if (!reads_key(a, "attention_bias")) return;
  const bool attention_bias = r.optional_bool("attention_bias").value_or(false);
  const bool mlp_bias = reads_key(a, "mlp_bias") && r.optional_bool("mlp_bias").value_or(false);
  if (attention_bias && mlp_bias) {
    m.add_bias_linear = true;
  } else if (attention_bias || mlp_bias) {
    const char* key = attention_bias ? "attention_bias" : "mlp_bias";
    r.map().report(key, std::string("true with ") +
                            (attention_bias ? "mlp_bias false" : "attention_bias false") +
                            " is not modelled: sextant represents biases on every linear layer "
                            "(both true) or on none (both false)");
  }
}

// Sliding-window attention. Mistral and Mixtral read sliding_window (null: none);
// the Qwen families read it only with use_sliding_window, and then only in the
// layers from max_window_layers on (Qwen2Attention); sextant models one window
// for every layer, so a window on some layers only is refused.
void read_sliding_window(Reader& r, const Architecture& a, ModelConfig& m) {
  if (!reads_key(a, "sliding_window")) return;
  if (reads_key(a, "use_sliding_window") &&
      !r.optional_bool("use_sliding_window").value_or(false)) {
    return;  // transformers ignores sliding_window then, and so does the model
  }
  const YAML::Node w = r.value("sliding_window");
  if (!w.IsDefined() && a.name == "MistralForCausalLM") {
    m.sliding_window = 4096;  // MistralConfig's default (Mistral 7B v0.1's window)
    return;
  }
  if (!w.IsDefined() || w.IsNull()) {
    if (reads_key(a, "use_sliding_window")) {
      r.map().report("use_sliding_window", "is true but sliding_window is missing or null");
    }
    return;
  }
  std::int64_t window = 0;
  if (!w.IsScalar() || is_quoted_scalar(w) || !YAML::convert<std::int64_t>::decode(w, window) ||
      window < 1 || window > kImplausible) {
    r.diags().push_back(diagnostic_at(
        w, r.file(), "sliding_window",
        "expected a positive integer (the keys each query sees) or null, got " +
            (w.IsScalar() ? (is_quoted_scalar(w) ? "the string \"" + w.Scalar() + "\""
                                            : "'" + w.Scalar() + "'")
                          : std::string("a non-number"))));
    return;
  }
  if (reads_key(a, "max_window_layers")) {
    const std::int64_t first = r.optional_int("max_window_layers").value_or(0);
    if (first > 0 && first < m.num_layers) {
      r.map().report("max_window_layers",
                     "is " + std::to_string(first) + ": only layers " + std::to_string(first) +
                         " to " + std::to_string(m.num_layers - 1) +
                         " use the sliding window; sextant models one attention for every layer "
                         "(max_window_layers 0: all slide; >= num_hidden_layers: none)");
      return;
    }
    if (first >= m.num_layers) return;  // no layer slides
  }
  m.sliding_window = window;
}

ModelConfig read_model(Reader& r, const Architecture& a, std::int64_t seq_length_override) {
  const bool llama = a.family == Family::kLlama;
  const bool gpt2 = a.family == Family::kGpt2;
  auto key = [&](std::string_view standard, std::string_view gpt2_name) {
    return gpt2 ? r.pick(gpt2_name, standard) : r.pick(standard, gpt2_name);
  };
  ModelConfig m;
  m.name = model_name(r);
  m.num_layers = static_cast<int>(r.positive_int(key("num_hidden_layers", "n_layer")));
  m.hidden_size = r.positive_int(key("hidden_size", "n_embd"));
  const std::string_view heads_key = key("num_attention_heads", "n_head");
  m.num_attention_heads = static_cast<int>(r.positive_int(heads_key));

  m.num_query_groups = m.num_attention_heads;
  if (auto groups = llama ? r.optional_int("num_key_value_heads") : std::nullopt) {
    r.check_positive("num_key_value_heads", *groups);
    m.num_query_groups = static_cast<int>(*groups);
    if (*groups > 0 && m.num_attention_heads % *groups != 0) {
      r.map().report("num_key_value_heads",
                     "must divide " + std::string(heads_key) + " (" +
                         std::to_string(m.num_attention_heads) + "), got " +
                         std::to_string(*groups));
    }
  }
  if (auto head_dim = llama ? r.optional_int("head_dim") : std::nullopt) {
    r.check_positive("head_dim", *head_dim);
    m.kv_channels = static_cast<int>(*head_dim);
  } else if (m.num_attention_heads > 0) {
    if (m.hidden_size % m.num_attention_heads != 0) {
      r.map().report(heads_key, "must divide " + std::string(key("hidden_size", "n_embd")) +
                                    " (" + std::to_string(m.hidden_size) + ")" +
                                    (llama ? " unless head_dim is given" : "") + ", got " +
                                    std::to_string(m.num_attention_heads));
    }
    m.kv_channels = static_cast<int>(m.hidden_size / m.num_attention_heads);
  }

  const std::string_view ffn_key = key("intermediate_size", "n_inner");
  if (gpt2) {
    // GPT2MLP: n_inner null or absent means 4 * n_embd.
    const auto inner = r.optional_int(ffn_key);
    if (inner) r.check_positive(ffn_key, *inner);
    // (An implausible n_embd was reported already; do not overflow on it.)
    m.ffn_hidden_size = inner.value_or(m.hidden_size <= kImplausible ? 4 * m.hidden_size : 0);
  } else {
    m.ffn_hidden_size = r.positive_int(ffn_key);
  }
  m.vocab_size = r.positive_int("vocab_size");
  m.seq_length = training_length(r, a, key("max_position_embeddings", "n_positions"),
                                 seq_length_override);

  read_activation(r, a, m);
  m.normalization = llama ? Normalization::kRmsNorm : Normalization::kLayerNorm;
  m.position_embedding = gpt2 ? PositionEmbedding::kLearnedAbsolute : PositionEmbedding::kRope;
  m.tie_embeddings = r.optional_bool("tie_word_embeddings").value_or(a.tie_default);
  if (!gpt2) {
    const std::string_view base_key = a.family == Family::kGptNeox ? "rotary_emb_base" : "rope_theta";
    m.rotary_base = r.optional_double(base_key).value_or(10000.0);
    r.map().require_in_range(base_key, m.rotary_base, 1.0, 1e9);
  }
  read_biases(r, a, m);
  read_sliding_window(r, a, m);
  switch (a.family) {
    case Family::kLlama:  // no residual dropout in these blocks
      m.hidden_dropout = 0.0;
      m.attention_dropout = dropout(r, "attention_dropout", 0.0);
      break;
    case Family::kGpt2:
      m.hidden_dropout = dropout(r, "resid_pdrop", 0.1);
      m.attention_dropout = dropout(r, "attn_pdrop", 0.1);
      break;
    case Family::kGptNeox:
      m.hidden_dropout = dropout(r, "hidden_dropout", 0.0);
      m.attention_dropout = dropout(r, "attention_dropout", 0.0);
      break;
  }
  if (a.moe == MoeKind::kDeepseek) read_mla(r, m);
  read_moe(r, a, m);
  refuse_keys_not_read(r, a);
  refuse_unknown_keys(r, a);
  return m;
}

}  // namespace

std::vector<std::string> hf_supported_architectures() {
  std::vector<std::string> out;
  for (const Architecture& a : kArchitectures) out.emplace_back(a.name);
  return out;
}

ModelConfig load_hf_config_text(const std::string& text, const std::string& file,
                                std::int64_t seq_length_override) {
  std::vector<Diagnostic> diags;
  if (seq_length_override < 0) {
    diags.push_back({"--seq-length", 0, 0, "",
                     "must be positive, got " + std::to_string(seq_length_override)});
  }
  // yaml-cpp reads JSON as YAML and so accepts what JSON does not (NaN,
  // trailing commas, invalid UTF-8, a key twice): the text is checked as JSON
  // first, and yaml-cpp then gives the values their line and column.
  if (const std::optional<JsonProblem> problem = first_json_problem(text)) {
    diags.push_back({file, problem->position.line, problem->position.column, problem->key,
                     problem->message});
    throw_if_any(std::move(diags));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    diags.push_back(
        {file, one_based(e.mark.line), one_based(e.mark.column), "", "invalid JSON: " + e.msg});
    throw_if_any(std::move(diags));
  }
  if (!root.IsMap()) {
    diags.push_back(diagnostic_at(root, file, "", "expected a JSON object (a config.json)"));
    throw_if_any(std::move(diags));
  }
  Reader reader(root, file, diags);
  ModelConfig m;
  if (const Architecture* a = find_architecture(reader)) {
    m = read_model(reader, *a, seq_length_override);
  }
  throw_if_any(std::move(diags));
  return m;
}

ModelConfig load_hf_config_file(const std::string& path, std::int64_t seq_length_override) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(
        {{path, 0, 0, "", "cannot open file (does it exist and is it readable?)"}});
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return load_hf_config_text(buffer.str(), path, seq_length_override);
}

}  // namespace sextant::sim
