// A double-precision CPU model of the decoder-only transformer the engine
// trains, forward and backward, for checking the engine's loss and gradients.
//
// Two families share one definition (the same switches as
// engine/model/transformer_shape.h):
// - GPT: learned positions, LayerNorm, GELU (tanh form), biases everywhere;
// - Llama: rotary embeddings, RMSNorm, SwiGLU, grouped-query attention, no
//   biases.
// Both are pre-norm, causal, and end in a final norm, the vocabulary
// projection (the embedding table when tied) and the mean cross-entropy over
// every token of the batch. reference_model.cc writes each formula beside its
// source.
//
// The backward pass is written by hand (no automatic differentiation), so that
// reference_model_test.cc can check it against finite differences of the
// forward pass; the GPU test (trainer_test.cc) then checks the engine against
// it. Everything is plain loops over std::vector<double>: small models only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace sextant::engine::testing {

struct ReferenceConfig {
  enum class Family {
    kGpt,    // learned positions, LayerNorm, GELU, biases
    kLlama,  // rotary embeddings, RMSNorm, SwiGLU, no biases
  };

  int num_layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;  // the MLP's inner width (per branch of SwiGLU)
  int heads = 0;       // query heads
  int kv_heads = 0;    // key/value heads; divides heads (== heads without GQA)
  int head_dim = 0;    // even for Llama (rotary pairs)
  int vocab = 0;
  int seq = 0;         // tokens per sequence; wpe has this many rows
  Family family = Family::kGpt;
  bool tie_embeddings = true;  // logits use wte; no lm_head
  double norm_eps = 1e-5;      // inside the square root of both norms
  double rope_theta = 10000;   // the rotary base (Su et al. 2021, eq. 15)

  bool gpt() const { return family == Family::kGpt; }
  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  /// One token's fused projection: [Q heads | K heads | V heads].
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  /// fc1's output: ffn_hidden for GELU, [gate | up] (2 * ffn_hidden) for SwiGLU.
  int fc1_dim() const { return gpt() ? ffn_hidden : 2 * ffn_hidden; }
};

/// One block's parameters; weights are PyTorch's (out_features, in_features),
/// row-major. Tensors a family does not have are empty.
struct ReferenceLayer {
  std::vector<double> norm1_gamma;  // (hidden)
  std::vector<double> norm1_beta;   // (hidden), GPT only
  std::vector<double> qkv_weight;   // (q_dim + 2 kv_dim, hidden): rows [Q h0..|K kv0..|V kv0..]
  std::vector<double> qkv_bias;     // (q_dim + 2 kv_dim), GPT only
  std::vector<double> proj_weight;  // (hidden, q_dim)
  std::vector<double> proj_bias;    // (hidden), GPT only
  std::vector<double> norm2_gamma;  // (hidden)
  std::vector<double> norm2_beta;   // (hidden), GPT only
  std::vector<double> fc1_weight;   // GPT (ffn, hidden); Llama (2 ffn, hidden): rows [gate | up]
  std::vector<double> fc1_bias;     // (ffn), GPT only
  std::vector<double> fc2_weight;   // (hidden, ffn)
  std::vector<double> fc2_bias;     // (hidden), GPT only
};

/// Every parameter of the model; the same struct holds their gradients.
struct ReferenceWeights {
  std::vector<double> wte;  // (vocab, hidden)
  std::vector<double> wpe;  // (seq, hidden), GPT only
  std::vector<ReferenceLayer> layers;
  std::vector<double> final_norm_gamma;  // (hidden)
  std::vector<double> final_norm_beta;   // (hidden), GPT only
  std::vector<double> lm_head;           // (vocab, hidden), only when !tie_embeddings
};

/// The mean cross-entropy of predicting `targets` from `tokens`, both
/// (batch, seq) row-major, token ids in [0, vocab). Throws
/// std::invalid_argument (naming the values) on an inconsistent config, weights
/// of the wrong sizes, or tokens of the wrong count or range.
double reference_loss(const ReferenceConfig& config, const ReferenceWeights& weights,
                      const std::vector<int>& tokens, const std::vector<int>& targets, int batch);

/// reference_loss, and in `gradients` (overwritten, shaped as `weights`) the
/// gradient of that mean loss with respect to every parameter.
double reference_loss_and_gradients(const ReferenceConfig& config, const ReferenceWeights& weights,
                                    const std::vector<int>& tokens, const std::vector<int>& targets,
                                    int batch, ReferenceWeights* gradients);

/// Each token's cross-entropy, (batch, seq) row-major; reference_loss is their
/// mean. Throws as reference_loss.
std::vector<double> reference_token_losses(const ReferenceConfig& config,
                                           const ReferenceWeights& weights,
                                           const std::vector<int>& tokens,
                                           const std::vector<int>& targets, int batch);

/// Weights of `config`'s shapes drawn from `seed`: every weight, bias and beta
/// uniform in [-scale, scale], every gamma uniform in [1 - scale, 1 + scale].
/// The same seed gives the same weights.
ReferenceWeights reference_random_weights(const ReferenceConfig& config, std::uint64_t seed,
                                          double scale);

/// Calls `visit` on every tensor `config`'s family has (skipping the empty
/// ones the family lacks: wpe, betas and biases for Llama, lm_head when tied)
/// with the engine's name for it (engine/model/parameter_layout.cc): "wte",
/// "wpe", "layers.<i>.<field>" in ReferenceLayer's field order,
/// "final_norm_gamma", "final_norm_beta", "lm_head". Throws
/// std::invalid_argument when weights.layers does not hold num_layers layers.
void for_each_tensor(
    ReferenceWeights& weights, const ReferenceConfig& config,
    const std::function<void(const std::string& name, std::vector<double>& tensor)>& visit);

/// Rotates one head vector (head_dim values, even) in place as the Llama
/// forward pass does at sequence position `position` (Su et al. 2021, eq. 34,
/// rotate-half pairing: element i with element i + head_dim / 2).
void reference_rope(std::span<double> head, int position, double theta);

}  // namespace sextant::engine::testing
