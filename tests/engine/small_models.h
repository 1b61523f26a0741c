// What the engine's parallel parity tests share: a small GPT or Llama, the
// per-tensor error they report, and the optimizer settings of a 3-step run.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/trainer.h"
#include "sim/core/model_config.h"

namespace sextant::engine::testing {

/// Two layers of hidden 128, heads of 64, sequence 48, vocabulary 160. GPT:
/// LayerNorm, GELU of 512, biases, learned positions, tied embeddings. Llama:
/// RMSNorm, SwiGLU of 256, RoPE, no biases, untied. `groups` < `heads` is GQA.
inline sim::ModelConfig small_model(std::string name, bool llama, int heads, int groups) {
  sim::ModelConfig m;
  m.name = std::move(name);
  m.num_layers = 2;
  m.hidden_size = 128;
  m.ffn_hidden_size = llama ? 256 : 512;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = 64;
  m.vocab_size = 160;
  m.seq_length = 48;
  m.activation = llama ? sim::Activation::kSwiglu : sim::Activation::kGelu;
  m.normalization = llama ? sim::Normalization::kRmsNorm : sim::Normalization::kLayerNorm;
  m.position_embedding = llama ? sim::PositionEmbedding::kRope : sim::PositionEmbedding::kLearnedAbsolute;
  m.add_bias_linear = !llama;
  m.tie_embeddings = !llama;
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  return m;
}

/// ||got - want|| / ||want|| (L2 over the tensor, in double).
inline double relative_l2_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

/// One GPU's layout: `global_batch` sequences in micro-batches of `micro_batch`.
inline sim::ParallelLayout one_gpu_layout(int micro_batch, int global_batch,
                                          sim::Recompute recompute = sim::Recompute::kNone) {
  sim::ParallelLayout l;
  l.mbs = micro_batch;
  l.gbs = global_batch;
  l.recompute = recompute;
  return l;
}

/// lr 1e-3 without warmup, cosine to 1e-4 at step 3; GEMM tuning off, so every
/// trainer runs cuBLASLt's heuristic choice.
inline TrainerOptions three_step_options() {
  TrainerOptions o;
  o.tune_gemms = false;
  o.lr.max_lr = 1e-3;
  o.lr.min_lr = 1e-4;
  o.lr.warmup_steps = 0;
  o.lr.decay_steps = 3;
  return o;
}

}  // namespace sextant::engine::testing
