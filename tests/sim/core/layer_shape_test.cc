#include "sim/core/layer_shape.h"

#include <gtest/gtest.h>

namespace sextant::sim {
namespace {

ModelConfig llama_like() {
  // Llama 3 8B's attention and MLP: 32 heads of 128, 8 query groups, ffn 14336, SwiGLU.
  ModelConfig m;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.seq_length = 8192;
  m.activation = Activation::kSwiglu;
  return m;
}

TEST(LayerShape, OneGpuHoldsTheWholeLayer) {
  ParallelLayout l;
  l.mbs = 2;
  const LayerShape s = layer_shape(llama_like(), l);
  EXPECT_EQ(s.heads, 32);
  EXPECT_EQ(s.kv_heads, 8);
  EXPECT_EQ(s.qkv_width(), 32 * 128 + 2 * 8 * 128);  // 6144
  EXPECT_EQ(s.fc1_width(), 2 * 14336);
  EXPECT_EQ(s.tokens, 2 * 8192);
  EXPECT_EQ(s.norm_tokens(), 2.0 * 8192);
}

TEST(LayerShape, TensorSequenceAndContextParallelShards) {
  // tp=4, sp, cp=2, mbs=1: 32/4 = 8 query heads, 8/4 = 2 groups, ffn 14336/4 = 3584;
  // 8192/2 = 4096 tokens per rank, of which the norms see 4096/4 = 1024.
  ParallelLayout l;
  l.tp = 4, l.sp = true, l.cp = 2;
  const LayerShape s = layer_shape(llama_like(), l);
  EXPECT_EQ(s.heads, 8);
  EXPECT_EQ(s.kv_heads, 2);
  EXPECT_EQ(s.q_width(), 1024);
  EXPECT_EQ(s.qkv_width(), 1024 + 2 * 256);
  EXPECT_EQ(s.ffn, 3584);
  EXPECT_EQ(s.fc1_width(), 7168);
  EXPECT_EQ(s.hidden, 4096);
  EXPECT_EQ(s.tokens, 4096);
  EXPECT_EQ(s.norm_tokens(), 1024.0);
}

TEST(PaddedVocabSize, RoundsUpToAMultipleOf128TimesTp) {
  // Megatron's _vocab_size_with_padding: a multiple of 128·tp.
  EXPECT_EQ(padded_vocab_size(50257, 1), 50257);    // tp = 1: as the preset says
  EXPECT_EQ(padded_vocab_size(50257, 2), 50432);    // ceil(50257 / 256) = 197; 197·256
  EXPECT_EQ(padded_vocab_size(51200, 8), 51200);    // 51200 = 1024·50 already
  EXPECT_EQ(padded_vocab_size(128256, 8), 129024);  // ceil(128256 / 1024) = 126; 126·1024
  EXPECT_EQ(padded_vocab_size(32000, 4), 32256);    // ceil(32000 / 512) = 63; 63·512
  EXPECT_EQ(padded_vocab_size(160, 4), 512);
}

}  // namespace
}  // namespace sextant::sim
