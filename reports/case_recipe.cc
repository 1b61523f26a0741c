#include "reports/case_recipe.h"

#include <algorithm>
#include <cctype>

namespace sextant::reports {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains(const std::string& text, const char* word) {
  return text.find(word) != std::string::npos;
}

}  // namespace

ModelFamily model_family_of(const std::string& case_id, const std::string& source) {
  const std::string id = lower(case_id);
  if (contains(id, "llama")) return ModelFamily::kLlama;
  if (contains(id, "nemotron")) return ModelFamily::kNemotron;
  if (contains(id, "gpt3") && follows_nemo_recipe(source)) return ModelFamily::kNemoGpt;
  return ModelFamily::kMegatronGpt;
}

void apply_architecture(ModelFamily family, sim::ModelConfig& m) {
  switch (family) {
    case ModelFamily::kMegatronGpt:
      return;  // ModelConfig's defaults are Megatron-LM's GPT
    case ModelFamily::kNemoGpt:
      // NeMo GPTConfig: share_embeddings_and_output_weights defaults to True;
      // GPTConfig175B sets hidden_dropout = attention_dropout = 0.0.
      m.tie_embeddings = true;
      if (m.num_layers >= 96) m.hidden_dropout = m.attention_dropout = 0.0;
      return;
    case ModelFamily::kLlama:
      m.activation = sim::Activation::kSwiglu;
      m.normalization = sim::Normalization::kRmsNorm;
      break;
    case ModelFamily::kNemotron:
      m.activation = sim::Activation::kSquaredRelu;
      m.normalization = sim::Normalization::kLayerNorm;
      break;
  }
  m.position_embedding = sim::PositionEmbedding::kRope;
  m.add_bias_linear = false;
  m.hidden_dropout = m.attention_dropout = 0.0;
  m.tie_embeddings = false;
}

std::string framework_of(const std::string& source) {
  // Megatron-LM's Llama examples follow NeMo's layouts but run Megatron-Core
  // r0.12 in NGC PyTorch 25.03 (examples/llama/README.md), not NeMo 24.07.
  if (contains(source, "Megatron-LM examples/llama")) return "megatron-core-0.12";
  if (follows_nemo_recipe(source)) return "nemo-24.07";
  if (contains(source, "Narayanan et al.")) return "megatron-lm-2021";
  // Sequence parallelism and selective recomputation, Megatron-LM of 2022.
  if (contains(source, "Korthikanti")) return "megatron-lm-2022";
  // Megatron-DeepSpeed on DeepSpeed's pipeline engine: MT-NLG (Smith et al.
  // 2022, arXiv:2201.11990) and BLOOM (BigScience 2022, arXiv:2211.05100), or
  // the fork by name.
  for (const char* word : {"Megatron-DeepSpeed", "MT-NLG", "Megatron-Turing", "2201.11990",
                           "BLOOM", "BigScience", "2211.05100"}) {
    if (contains(source, word)) return "deepspeed-pipe-2021";
  }
  return "";
}

bool follows_nemo_recipe(const std::string& source) {
  // NeMo's own tables, and scripts that say they follow NeMo's performance scripts.
  return contains(source, "NeMo");
}

void apply_nemo_recipe(sim::PartialLayout& l, bool zero_stated) {
  if (!zero_stated) l.zero = 1;
  l.overlap_grad_reduce = true;
  l.overlap_param_gather = true;
  l.tp_comm_overlap = l.tp.value_or(1) > 1 && l.sp.value_or(false);
  if (l.precision == sim::Precision::kFp8) l.grad_reduce_in_fp32 = false;
}

}  // namespace sextant::reports
