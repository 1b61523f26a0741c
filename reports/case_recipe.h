// What a published case leaves unsaid, read from what it does say.
//
// The dev-case format (validation/dev_cases.yaml) gives a model's dimensions but
// not its architecture, and a layout but not always the software's settings.
// Both follow from the case's name and source, by the documented defaults of the
// code that ran it:
//  - the architecture from the model family named in the case id: Llama 2/3
//    (SwiGLU, RMSNorm, RoPE, no biases, no dropout, untied; Touvron et al. 2023,
//    Dubey et al. 2024), Nemotron-4 (squared ReLU, LayerNorm, RoPE, no biases, no
//    dropout, untied; Parmar et al. 2024, arXiv:2402.16819, Sec. 2), NeMo's GPT-3
//    (GeLU, LayerNorm, learned positions, biases; NeMo GPTConfig*: dropout 0 for
//    175B, Megatron's 0.1 otherwise; shared input/output embeddings);
//    anything else is Megatron-LM's GPT (GeLU, LayerNorm, learned positions, 0.1 dropout);
//  - the recipe's settings from the source: NeMo's pre-training recipes (and the
//    Megatron-LM Llama examples, which "follow NeMo performance scripts") use the
//    distributed optimizer (distributed_fused_adam), overlap_grad_reduce and
//    overlap_param_gather, and their performance recipes tp_comm_overlap
//    (NeMo nemo/collections/llm/recipes/llama3_70b.py: trainer() and
//    pretrain_recipe_performance()), and NeMo's performance scripts reduce the
//    gradients of FP8 runs in bf16 (scripts/performance/llm/pretrain_*.py: with
//    compute dtype fp8, plugins = bf16_with_fp8_mixed(); grad_reduce_in_fp32 =
//    False); Megatron-LM's own runs state their flags in the notes, which are
//    read as before.
#pragma once

#include <string>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::reports {

/// The published model family a case id names.
enum class ModelFamily { kMegatronGpt, kNemoGpt, kLlama, kNemotron };

ModelFamily model_family_of(const std::string& case_id, const std::string& source);

/// Sets the architecture fields of `model` (activation, norm, positions, biases,
/// dropout, tied embeddings) for `family`; the dimensions are left as they are.
void apply_architecture(ModelFamily family, sim::ModelConfig& model);

/// The configs/frameworks preset of the software that ran the case: Megatron-LM's
/// Llama examples "megatron-core-0.12" (their README: core_r0.12.0, PyTorch
/// 25.03), NeMo's recipes "nemo-24.07", Narayanan et al. 2021's Megatron-LM
/// "megatron-lm-2021", Korthikanti et al. 2022's "megatron-lm-2022", Megatron-DeepSpeed's
/// pipeline runs (MT-NLG, BLOOM) "deepspeed-pipe-2021"; empty for Megatron-Core 0.8
/// (the datasheet profiles' own fraction).
std::string framework_of(const std::string& source);

/// True when the case was run with NeMo's recipes (or scripts that follow them).
bool follows_nemo_recipe(const std::string& source);

/// The NeMo recipe's settings: zero=1 where the case does not state the ZeRO
/// stage (`zero_stated`), the three overlaps (tp_comm_overlap only where
/// tp > 1 with sequence parallelism), and bf16 gradient reduction under FP8.
/// Reads layout.precision, so call it after that is set.
void apply_nemo_recipe(sim::PartialLayout& layout, bool zero_stated);

}  // namespace sextant::reports
