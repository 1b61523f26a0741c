// Import of a Hugging Face transformers config.json as a ModelConfig, so that
// `--model ./config.json` simulates a published model without writing a preset.
//
// A config.json lists sizes only; how the layers are built (gated MLP, norm,
// positions, biases) lives in transformers' modelling code, so the importer
// keys that on `architectures[0]` (or `model_type` when there is no list):
//
//   architecture          model_type  MLP     norm       positions  biases  MoE
//   LlamaForCausalLM      llama       swiglu  rmsnorm    rope       (1)     -
//   MistralForCausalLM    mistral     swiglu  rmsnorm    rope       no      -
//   MixtralForCausalLM    mixtral     swiglu  rmsnorm    rope       no      every layer
//   Qwen2ForCausalLM      qwen2       swiglu  rmsnorm    rope       qkv     -
//   Qwen2MoeForCausalLM   qwen2_moe   swiglu  rmsnorm    rope       qkv     routed + shared
//   Qwen3ForCausalLM      qwen3       swiglu  rmsnorm    rope       (1)     -
//   Qwen3MoeForCausalLM   qwen3_moe   swiglu  rmsnorm    rope       (1)     routed
//   DeepseekV2ForCausalLM deepseek_v2 swiglu  rmsnorm    rope       no      leading dense, then
//   DeepseekV3ForCausalLM deepseek_v3                                         routed + shared;
//                                                                     attention: MLA
//   GPT2LMHeadModel       gpt2        gelu    layernorm  learned    yes     -
//   GPTNeoXForCausalLM    gpt_neox    gelu    layernorm  rope (3)   yes     -
//
// Keys read (the first name is the one the family writes; the second is
// accepted as an alias, as transformers' attribute_map does):
//
//   ModelConfig field         config.json key                         when absent
//   num_layers                num_hidden_layers | n_layer             error
//   hidden_size               hidden_size | n_embd                    error
//   ffn_hidden_size           intermediate_size | n_inner             error; GPT-2: 4·hidden
//   num_attention_heads       num_attention_heads | n_head            error
//   num_query_groups          num_key_value_heads (Llama family)      = heads
//   kv_channels               head_dim (Llama family)                 hidden / heads
//   vocab_size                vocab_size                              error
//   seq_length                rope_scaling.original_max_position_     --seq-length required
//                             embeddings (RoPE); n_positions (GPT-2)
//   tie_embeddings            tie_word_embeddings                     transformers' class default
//                                                                     (GPT-2 true, others false)
//   add_bias_linear           attention_bias && mlp_bias (Llama),     false; GPT-2, NeoX true
//                             attention_bias (Qwen3)
//   add_qkv_bias              (Qwen2, Qwen2-MoE: always)              false
//   sliding_window            sliding_window (Mistral, Mixtral; Qwen  none; Mistral 4096
//                             with use_sliding_window, all layers)    (MistralConfig default)
//   rotary_base               rope_theta | rotary_emb_base (NeoX)     10000 (RoPE families)
//   hidden_dropout            resid_pdrop (GPT-2), hidden_dropout     0.1 (GPT-2), 0
//                             (NeoX); 0 for the Llama family
//   attention_dropout         attn_pdrop (GPT-2), attention_dropout   0.1 (GPT-2), 0
//   activation                hidden_act | activation_function        must be silu (gated
//                                                                     families) or a gelu variant
//   name                      _name_or_path                           file stem; for
//                                                                     ".../<dir>/config.json" <dir>
//   moe.num_experts           num_local_experts (Mixtral), num_experts (Qwen MoE)
//   moe.router_topk           num_experts_per_tok
//   moe.ffn_hidden_size       intermediate_size (Mixtral), moe_intermediate_size (Qwen MoE)
//   moe.shared_expert_...     shared_expert_intermediate_size (Qwen2-MoE, required); 0 otherwise
//   (DeepSeek) moe.num_experts n_routed_experts; moe.shared_expert_ffn_hidden_size
//                             n_shared_experts · moe_intermediate_size; moe.first_dense_layers
//                             first_k_dense_replace (moe_layer_freq must be 1); mla.*
//                             q_lora_rank (null: 0), kv_lora_rank, qk_nope_head_dim,
//                             qk_rope_head_dim, v_head_dim. Not modelled, so refused
//                             by name unless off: num_nextn_predict_layers (DeepSeek-V3's
//                             multi-token prediction; accepted 0), scoring_func
//                             (accepted softmax: the router is costed as a softmax
//                             top-k), topk_group < n_group (node-limited routing).
//   moe.first_dense_layers    from decoder_sparse_step and mlp_only_layers (Qwen MoE; defaults
//                             1 and []): layer i is MoE unless i is in mlp_only_layers or
//                             (i+1) % decoder_sparse_step != 0, as in transformers
//
// max_position_embeddings is the model's *longest* context (131072 for Llama
// 3.1), not the length it was trained at, so it is never simulated: a RoPE model
// takes rope_scaling.original_max_position_embeddings (Llama 3.1: 8192) or
// `seq_length_override` (the CLI's --seq-length), and is an error without both.
//
// Keys of other architectures (experts under LlamaForCausalLM, DeepSeek's
// multi-head latent attention kv_lora_rank outside a Deepseek class, a sliding_window that the class does
// not read, ...) are refused naming the key: transformers would silently ignore
// them and build a different model than the file describes.
//
// What a ModelConfig cannot represent, and what is done instead:
//  (1) Llama: attention_bias and mlp_bias both true (add_bias_linear) or both
//      false; one without the other is refused (sextant represents biases on
//      every linear layer or on q, k, v only). Qwen3's attention_bias true (no MLP
//      bias key) is refused the same way.
//  (3) GPT-NeoX's partial rotary (rotary_pct) and parallel residual
//      (use_parallel_residual): modelled as full RoPE and sequential blocks
//      (same GEMMs; a little less element-wise work).
//  - a sliding window on some layers only (Qwen's max_window_layers between 1
//    and num_hidden_layers - 1, or a mixed layer_types): refused.
//  - Qwen3's q/k RMSNorm, Qwen2-MoE's sigmoid gate on the shared expert,
//    rope_scaling and GPT-2's embedding dropout (embd_pdrop): not modelled.
//  - MoE layers interleaved with dense ones (decoder_sparse_step > 1, or
//    mlp_only_layers other than a leading run) are a ConfigError: sextant
//    models leading dense layers followed by MoE layers only.
//  - vocab_size is taken as written; Megatron would pad it to a multiple of
//    128·tp.
//
// Strictness (STYLE.md #5): the text must be JSON (RFC 8259, strict_json.h):
// valid UTF-8, no NaN or Infinity, no trailing comma, no key twice in an
// object; it is then read with yaml-cpp for each value's line and column.
// `architectures` lists exactly one class. Every top-level key is either read
// for the architecture, refused when it changes the computation and the
// architecture does not read it (kStructuralKeys in the .cc), or on the
// documented list of keys that leave the training cost unchanged (token ids,
// dtype, rms_norm_eps, generation defaults, router loss coefficients, ...:
// kKeysWithoutTrainingCost in the .cc); any other key is refused as unknown,
// listing the accepted ones. An unsupported architecture, a missing or
// mistyped key (a JSON string or null where a number belongs) and impossible
// values are all reported at once as a ConfigError, each as
// file:line:col: key: message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/model_config.h"

namespace sextant::sim {

/// The `architectures[0]` values the importer accepts, in the order messages list them.
std::vector<std::string> hf_supported_architectures();

/// `file` names the text in messages and gives the default name.
/// `seq_length_override`: 0 takes the pretraining length (see above); > 0
/// replaces it; < 0 is a ConfigError about --seq-length.
ModelConfig load_hf_config_text(const std::string& text, const std::string& file,
                                std::int64_t seq_length_override);
ModelConfig load_hf_config_file(const std::string& path, std::int64_t seq_length_override);

}  // namespace sextant::sim
