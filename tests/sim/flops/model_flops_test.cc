#include "sim/flops/model_flops.h"

#include <gtest/gtest.h>

#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

ModelConfig gpt3_175b() { return testing::gpt3_175b(); }

// Narayanan et al. 2021, eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with full recompute.
TEST(ModelFlops, Gpt3FullRecomputeMatchesNarayananEquation3) {
  const ModelConfig m = gpt3_175b();
  ParallelLayout l;
  l.gbs = 1536;
  l.recompute = Recompute::kFull;
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  const double eq3 = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  const StepFlops f = step_flops(m, l);
  EXPECT_NEAR(f.hardware_flops / eq3, 1.0, 1e-12);
  EXPECT_NEAR(f.hardware_flops, 4.5e18, 0.05e18);  // the figure: 4.5e18 per iteration
}

// Without recompute: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) (Megatron-LM training.py),
// the formula of the H100 dev cases.
TEST(ModelFlops, Gpt3NoRecomputeMatchesMegatron72Formula) {
  const ModelConfig m = gpt3_175b();
  ParallelLayout l;
  l.gbs = 1536;
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  const double megatron = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  const StepFlops f = step_flops(m, l);
  EXPECT_NEAR(f.model_flops / megatron, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(f.hardware_flops, f.model_flops);
}

// Selective recompute adds one forward of the attention core: 4·B·s²·h per layer.
TEST(ModelFlops, SelectiveRecomputeAddsAttentionCoreForward) {
  const ModelConfig m = gpt3_175b();
  ParallelLayout l;
  l.gbs = 8;
  l.recompute = Recompute::kSelective;
  const StepFlops f = step_flops(m, l);
  EXPECT_DOUBLE_EQ(f.hardware_flops - f.model_flops, 96.0 * 4 * 8 * 2048.0 * 2048 * 12288);
}

// GQA and SwiGLU: Llama-3-8B forward per token 2·(params without embedding) + attention.
TEST(ModelFlops, LlamaGqaSwigluLayer) {
  ModelConfig m;
  m.num_layers = 1;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.vocab_size = 128256;
  m.seq_length = 8192;
  m.activation = Activation::kSwiglu;
  const LayerFlops f = layer_forward_flops(m, 1.0, false);
  // QKV: 4096·(4096 + 2·1024) weights; projection 4096²; MLP 3·4096·14336.
  EXPECT_DOUBLE_EQ(f.qkv, 2.0 * 4096 * 6144);
  EXPECT_DOUBLE_EQ(f.projection, 2.0 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(f.mlp, 2.0 * 3 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(f.attention_core(), 4.0 * 8192 * 4096);
}

// Mixtral-style MoE: the router plus topk experts per token.
TEST(ModelFlops, MoeCountsTopkExpertsAndRouter) {
  ModelConfig m;
  m.num_layers = 1;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.vocab_size = 32000;
  m.seq_length = 4096;
  m.activation = Activation::kSwiglu;
  m.moe = MoeConfig{8, 2, 14336, 0, 0};
  const LayerFlops f = layer_forward_flops(m, 1.0, true);
  EXPECT_DOUBLE_EQ(f.router, 2.0 * 4096 * 8);
  EXPECT_DOUBLE_EQ(f.mlp, 2 * 2.0 * 3 * 4096 * 14336);
}

// Sliding window (Mistral 7B: s 8192, w 4096): Megatron's convention counts
// min(s, w) = 4096 keys per query; causally query i sees min(i, w) keys, so
// s·w − w²/2 = 8192·4096 − 4096²/2 = 25,165,824 pairs per sequence and head
// (33,554,432 = s²/2 without the window).
TEST(ModelFlops, SlidingWindowCountsAtMostWindowKeysPerQuery) {
  ModelConfig m = testing::gpt3_175b();
  m.seq_length = 8192;
  EXPECT_DOUBLE_EQ(attention_pairs_per_sequence(m, AttentionCounting::kMegatron), 8192.0 * 8192);
  EXPECT_DOUBLE_EQ(attention_pairs_per_sequence(m, AttentionCounting::kCausal), 33554432.0);
  const LayerFlops full = layer_forward_flops(m, 1.0, false);
  m.sliding_window = 4096;
  EXPECT_DOUBLE_EQ(attention_pairs_per_sequence(m, AttentionCounting::kMegatron), 8192.0 * 4096);
  EXPECT_DOUBLE_EQ(attention_pairs_per_sequence(m, AttentionCounting::kCausal), 25165824.0);
  const LayerFlops windowed = layer_forward_flops(m, 1.0, false);
  // One token: Q·Kᵀ 2·4096·a·d with a·d = 12288, half of the full 2·8192·12288.
  EXPECT_DOUBLE_EQ(windowed.attention_scores, 2.0 * 4096 * 12288);
  EXPECT_DOUBLE_EQ(windowed.attention_scores, full.attention_scores / 2);
  EXPECT_DOUBLE_EQ(windowed.qkv, full.qkv);  // the GEMMs do not change
  // A window at least s long is no window.
  m.sliding_window = 8192;
  EXPECT_DOUBLE_EQ(layer_forward_flops(m, 1.0, false).attention_scores, full.attention_scores);
}

// The causal convention for MFU: attention counts s²/2 pairs; GPT-3 175B at s 2048
// (one sequence): Megatron 3·(96·(24h² + 4sh) + 2hV)·s, causal takes 2sh off each layer's 4sh.
TEST(ModelFlops, CausalCountingHalvesTheAttentionScores) {
  const ModelConfig m = testing::gpt3_175b();
  ParallelLayout l;
  l.gbs = 1;
  const double s = 2048, h = 12288, V = 51200, L = 96;
  const double megatron = 3 * s * (L * (24 * h * h + 4 * s * h) + 2 * h * V);
  const double causal = 3 * s * (L * (24 * h * h + 2 * s * h) + 2 * h * V);
  EXPECT_NEAR(step_flops(m, l).model_flops / megatron, 1.0, 1e-12);
  EXPECT_NEAR(step_flops(m, l, AttentionCounting::kCausal).model_flops / causal, 1.0, 1e-12);
}

// The same counts as a fraction: about 0.987 for GPT-3 175B at s 2048, smaller
// at a longer sequence (attention grows as s², the rest as s).
TEST(ModelFlops, CausalFractionFallsWithTheSequence) {
  ModelConfig m = testing::gpt3_175b();
  const double s = 2048, h = 12288, V = 51200, L = 96;
  EXPECT_NEAR(causal_flops_fraction(m),
              (L * (24 * h * h + 2 * s * h) + 2 * h * V) / (L * (24 * h * h + 4 * s * h) + 2 * h * V), 1e-12);
  m.seq_length = 32768;
  EXPECT_LT(causal_flops_fraction(m), 0.9);
}

}  // namespace
}  // namespace sextant::sim
