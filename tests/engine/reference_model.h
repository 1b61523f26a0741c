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
// With experts > 0 every layer's MLP is a Mixture-of-Experts layer instead
// (engine/transformer/moe_layer.h): a softmax router over the experts, the
// top-k experts of each token, their weights renormalised over the k selected,
// SwiGLU (Llama) or GELU (GPT) experts without biases, and optionally the
// Switch load-balancing loss over the whole batch as one group
// (kernels/moe_load_balancing.h), added to the returned loss.
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

  // Mixture of experts (all four unused when experts == 0: dense MLPs).
  int experts = 0;             // > 0: every layer's MLP is an MoE layer of this many experts
  int topk = 0;                // experts per token, in [1, experts]
  int expert_ffn = 0;          // one expert's inner width (per branch of SwiGLU)
  double aux_loss_coeff = 0;   // alpha of the Switch load-balancing loss; 0: off

  bool gpt() const { return family == Family::kGpt; }
  bool moe() const { return experts > 0; }
  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  /// One token's fused projection: [Q heads | K heads | V heads].
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  /// fc1's output: ffn_hidden for GELU, [gate | up] (2 * ffn_hidden) for SwiGLU.
  int fc1_dim() const { return gpt() ? ffn_hidden : 2 * ffn_hidden; }
  /// One expert's fc1 output: expert_ffn for GELU, [gate | up] (2 * expert_ffn) for SwiGLU.
  int expert_fc1_dim() const { return gpt() ? expert_ffn : 2 * expert_ffn; }
};

/// One block's parameters; weights are PyTorch's (out_features, in_features),
/// row-major. Tensors a family does not have are empty; an MoE layer has the
/// router and expert tensors and no fc1/fc2 (weights or biases), a dense layer
/// the reverse.
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
  std::vector<double> router_weight;      // (experts, hidden), MoE only
  /// (experts * expert_fc1_dim, hidden), MoE only: expert e's fc1 is the block of
  /// rows [e * expert_fc1_dim, (e + 1) * expert_fc1_dim), rows [gate | up] for SwiGLU.
  std::vector<double> expert_fc1_weight;
  /// (experts * hidden, expert_ffn), MoE only: expert e's fc2 (hidden, expert_ffn)
  /// is the block of rows [e * hidden, (e + 1) * hidden).
  std::vector<double> expert_fc2_weight;
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
/// (batch, seq) row-major, token ids in [0, vocab), plus (MoE with
/// aux_loss_coeff > 0) every layer's Switch load-balancing loss. Throws
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
/// mean (plus the MoE load-balancing losses, not in these). Throws as
/// reference_loss.
std::vector<double> reference_token_losses(const ReferenceConfig& config,
                                           const ReferenceWeights& weights,
                                           const std::vector<int>& tokens,
                                           const std::vector<int>& targets, int batch);

/// What one MoE layer's router did in the forward pass, for checking the
/// engine's routing and its statistics (engine/transformer/moe_layer.h,
/// MoeStatistics).
struct ReferenceMoeRouting {
  std::vector<double> logits;        // (rows, experts) the router's logits
  std::vector<int> topk_ids;         // (rows, topk) by descending probability, ties: lower index first
  std::vector<double> topk_weights;  // (rows, topk) the probabilities renormalised over the k selected
  std::vector<int> expert_tokens;    // (experts) tokens that selected each expert
  /// N sum_i f_i P_i over the batch, without alpha (MoeStatistics::aux_loss_sum's
  /// per-pass term); computed whatever aux_loss_coeff is.
  double aux_loss = 0;
  /// The smallest gap, over the tokens, between the logits of the k-th and the
  /// (k+1)-th choice (infinity when topk == experts): how far the logits may
  /// move (e.g. by rounding) before a selection changes.
  double min_selection_margin = 0;
};

/// Each MoE layer's routing for `tokens` ((batch, seq) as for reference_loss),
/// one entry per layer; empty for a dense model. Throws as reference_loss.
std::vector<ReferenceMoeRouting> reference_moe_routing(const ReferenceConfig& config,
                                                       const ReferenceWeights& weights,
                                                       const std::vector<int>& tokens, int batch);

/// Weights of `config`'s shapes drawn from `seed`: every weight, bias and beta
/// uniform in [-scale, scale], every gamma uniform in [1 - scale, 1 + scale].
/// The same seed gives the same weights.
ReferenceWeights reference_random_weights(const ReferenceConfig& config, std::uint64_t seed,
                                          double scale);

/// Calls `visit` on every tensor `config`'s family has (skipping the empty
/// ones the family lacks: wpe, betas and biases for Llama, lm_head when tied;
/// fc1/fc2 weights and biases of MoE layers, router and expert tensors of
/// dense ones) with the engine's name for it (engine/model/parameter_layout.cc):
/// "wte", "wpe", "layers.<i>.<field>" in ReferenceLayer's field order except
/// that an MoE layer's "router_weight", "expert_fc1_weight",
/// "expert_fc2_weight" come where fc1/fc2 would,
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
