// The transformer being trained, as a model preset (configs/models/*.yaml) describes it.
//
// Field names follow Megatron-LM's arguments (DESIGN.md, "YAML presets").
// Derived quantities are methods, never stored, so they cannot disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sextant::sim {

/// MLP activation: GeLU (GPT), SwiGLU (Llama; gated, two input projections) or
/// squared ReLU (Nemotron-4; So et al. 2021 "Primer", relu(x)^2, one projection).
enum class Activation { kGelu, kSwiglu, kSquaredRelu };
enum class Normalization { kLayerNorm, kRmsNorm };
/// Megatron --position-embedding-type: learned absolute positions (GPT) or RoPE (Llama).
enum class PositionEmbedding { kLearnedAbsolute, kRope };

/// Mixture-of-Experts MLP (Shazeer et al. 2017; Megatron-Core MoE arguments).
struct MoeConfig {
  int num_experts = 0;
  int router_topk = 0;                              // experts each token visits
  std::int64_t ffn_hidden_size = 0;                 // per expert
  std::int64_t shared_expert_ffn_hidden_size = 0;   // 0: no shared expert
  int first_dense_layers = 0;                       // leading layers with a dense MLP
  /// Tokens the busiest expert-parallel rank receives over the mean, >= 1
  /// (1: balanced routing, the default). The grouped GEMMs and the all-to-all
  /// wait for that rank, and it stores that many expert activations. A run
  /// with Megatron's --moe-expert-capacity-factor C drops tokens beyond C, so
  /// its factor is at most C. A model file takes 1 to num_experts; `run
  /// --compare` sets what it measured (engine/model/expert_load.h), below 1
  /// when a capacity dropped pairs (fewer rows than T·k in the busiest rank).
  double expert_load_factor = 1.0;
  /// Each expert keeps at most capacity_factor times its even share of the
  /// routed pairs (Megatron's --moe-expert-capacity-factor; the engine's
  /// --moe-capacity-factor), dropping those of the smallest router weights;
  /// 0: dropless. The engine's kernels find them by a sort
  /// (sim/compute/engine_moe_kernels.cc); the rows it leaves are
  /// expert_load_factor's to say.
  double capacity_factor = 0.0;
};

/// Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, arXiv:2405.04434,
/// Sec. 2.1.2-2.1.3, eqs. 9-19): keys and values come from one per-token latent
/// of kv_lora_rank (c_KV = W^DKV h, then k^C = W^UK c_KV, v^C = W^UV c_KV), queries
/// from a latent of q_lora_rank (0: projected directly from h, as DeepSeek-V2-Lite),
/// and a decoupled RoPE part of qk_rope_head_dim per head (q^R from c_Q, one k^R
/// shared by all heads, from h). A query/key head is qk_nope + qk_rope wide, a
/// value head v_head_dim. Names follow the Hugging Face DeepSeek config.json.
struct MlaConfig {
  std::int64_t q_lora_rank = 0;    // d_c' (1536 in DeepSeek-V3); 0: no query compression
  std::int64_t kv_lora_rank = 0;   // d_c (512)
  int qk_nope_head_dim = 0;        // d_h (128)
  int qk_rope_head_dim = 0;        // d_h^R (64)
  int v_head_dim = 0;              // 128
};

struct ModelConfig {
  std::string name;
  int num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;  // dense MLP width
  int num_attention_heads = 0;
  int num_query_groups = 0;          // == heads for MHA; fewer means GQA
  int kv_channels = 0;               // head dimension
  std::int64_t vocab_size = 0;
  std::int64_t seq_length = 0;
  Activation activation = Activation::kGelu;
  Normalization normalization = Normalization::kLayerNorm;
  bool tie_embeddings = false;
  PositionEmbedding position_embedding = PositionEmbedding::kLearnedAbsolute;
  bool add_bias_linear = true;   // Megatron --add-bias-linear (default on; Llama off)
  // Megatron --add-qkv-bias: a bias on the Q, K and V projections even without
  // add_bias_linear (Qwen2). Parameters only: a bias add is 1 FLOP per output
  // element, 1/(2h) of its GEMM's, and the Megatron FLOP count leaves it out.
  bool add_qkv_bias = false;
  // Sliding-window attention (Beltagy et al. 2020, Longformer, Sec. 3.1; Mistral 7B,
  // Jiang et al. 2023, Sec. 2): each query attends to at most the `sliding_window`
  // latest keys, itself included. 0: full causal attention.
  std::int64_t sliding_window = 0;
  // RoPE's base (theta of Su et al. 2021, eq. 15): Megatron --rotary-base, HF rope_theta.
  // 10000 is both tools' default; Llama 3 uses 500000. Read only with rope.
  double rotary_base = 10000.0;
  double hidden_dropout = 0.1;   // Megatron --hidden-dropout; > 0 stores a 1-byte mask
  double attention_dropout = 0.1;
  std::optional<MoeConfig> moe;
  /// Multi-head latent attention in place of (grouped-query) attention; with it
  /// num_query_groups equals the heads and kv_channels is qk_nope + qk_rope.
  std::optional<MlaConfig> mla;

  /// Width of all query heads together: heads · kv_channels.
  std::int64_t query_width() const {
    return static_cast<std::int64_t>(num_attention_heads) * kv_channels;
  }
  /// Width of the K (or V) projection: groups · kv_channels.
  std::int64_t kv_width() const {
    return static_cast<std::int64_t>(num_query_groups) * kv_channels;
  }
  /// Width of one query/key head: qk_nope + qk_rope under MLA, else kv_channels.
  int qk_head_dim() const {
    return mla ? mla->qk_nope_head_dim + mla->qk_rope_head_dim : kv_channels;
  }
  /// Width of one value head: v_head_dim under MLA, else kv_channels.
  int value_head_dim() const { return mla ? mla->v_head_dim : kv_channels; }
  /// Width of the V projection: groups · value head (kv_width() without MLA).
  std::int64_t value_width() const {
    return static_cast<std::int64_t>(num_query_groups) * value_head_dim();
  }
  /// Width of the attention output (the output projection's input): heads · value head.
  /// Equals query_width() without MLA.
  std::int64_t attention_output_width() const {
    return static_cast<std::int64_t>(num_attention_heads) * value_head_dim();
  }
  /// Number of MLP input projections: 2 for SwiGLU (gate and up), 1 for GeLU.
  int mlp_input_projections() const { return activation == Activation::kSwiglu ? 2 : 1; }
  /// Layers whose MLP is a routed MoE layer (0 for dense models).
  int moe_layers() const { return moe ? num_layers - moe->first_dense_layers : 0; }
  int dense_layers() const { return num_layers - moe_layers(); }
  /// Keys a query can attend to at most: min(seq_length, sliding_window).
  std::int64_t attention_span() const {
    return sliding_window > 0 && sliding_window < seq_length ? sliding_window : seq_length;
  }
};

}  // namespace sextant::sim
