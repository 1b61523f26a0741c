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
  // RoPE's base (theta of Su et al. 2021, eq. 15): Megatron --rotary-base, HF rope_theta.
  // 10000 is both tools' default; Llama 3 uses 500000. Read only with rope.
  double rotary_base = 10000.0;
  double hidden_dropout = 0.1;   // Megatron --hidden-dropout; > 0 stores a 1-byte mask
  double attention_dropout = 0.1;
  std::optional<MoeConfig> moe;

  /// Width of all query heads together: heads · kv_channels.
  std::int64_t query_width() const {
    return static_cast<std::int64_t>(num_attention_heads) * kv_channels;
  }
  /// Width of the K (or V) projection: groups · kv_channels.
  std::int64_t kv_width() const {
    return static_cast<std::int64_t>(num_query_groups) * kv_channels;
  }
  /// Number of MLP input projections: 2 for SwiGLU (gate and up), 1 for GeLU.
  int mlp_input_projections() const { return activation == Activation::kSwiglu ? 2 : 1; }
  /// Layers whose MLP is a routed MoE layer (0 for dense models).
  int moe_layers() const { return moe ? num_layers - moe->first_dense_layers : 0; }
  int dense_layers() const { return num_layers - moe_layers(); }
};

}  // namespace sextant::sim
