// The engine's transformer shape as the simulator reads it
// (sim/core/transformer_shape.h): the same shard as sim::layer_shape, the
// head padding of the attention kernels, and where the norms' backward sums
// the residual projections' bias gradients.
#include "sim/core/transformer_shape.h"

#include <gtest/gtest.h>

#include "sim/core/layer_shape.h"
#include "sim/core/preset_catalog.h"

namespace sextant::sim {
namespace {

// Llama 3 8B: h 4096, 32 heads of 128 in 8 query groups, SwiGLU ffn 14336,
// vocab 128256, seq 8192, RMSNorm, RoPE, no biases.
ModelConfig llama3_8b() { return PresetCatalog(SEXTANT_TEST_CONFIG_DIR).model("llama3-8b"); }

TEST(SimTransformerShape, IsTheSimulatorsShardOfTheLayer) {
  // tp = 4, cp = 2, mbs 2: 32/4 = 8 heads (q 8·128 = 1024), 8/4 = 2 groups
  // (kv 256), ffn 14336/4 = 3584 ([gate | up]: 7168), 2·8192/2 = 8192 tokens.
  ParallelLayout l;
  l.tp = 4, l.cp = 2, l.mbs = 2, l.sp = true;
  const TransformerShape s = transformer_shape_of(llama3_8b(), l);
  const LayerShape shard = layer_shape(llama3_8b(), l);
  EXPECT_EQ(s.q_width(), 1024);
  EXPECT_EQ(s.q_width(), shard.q_width());
  EXPECT_EQ(s.kv_width(), 256);
  EXPECT_EQ(s.kv_width(), shard.kv_width());
  EXPECT_EQ(s.fc1_width(), 7168);
  EXPECT_EQ(s.fc1_width(), shard.fc1_width());
  EXPECT_EQ(s.tokens(), 8192);
  EXPECT_EQ(s.tokens(), shard.tokens);
  EXPECT_EQ(static_cast<double>(s.norm_tokens()), shard.norm_tokens());  // 8192 / 4 = 2048
  // 128256 rounds up to a multiple of 128·4 = 512: 128512, 32128 rows per rank.
  EXPECT_EQ(s.vocab, 32128);
  EXPECT_EQ(static_cast<double>(s.vocab), vocab_rows_per_rank(llama3_8b(), 4));
  EXPECT_FALSE(s.gelu);
  EXPECT_FALSE(s.learned_positions);
  EXPECT_EQ(s.rope_theta, 500000.0f);  // the preset's rotary_base
}

TEST(SimTransformerShape, HeadsOtherThan64Or128ArePaddedTo128) {
  TransformerShape s;
  s.head_dim = 64;
  EXPECT_EQ(s.attention_head_dim(), 64);
  EXPECT_FALSE(s.attention_padded());
  s.head_dim = 128;
  EXPECT_EQ(s.attention_head_dim(), 128);
  EXPECT_FALSE(s.attention_padded());
  s.head_dim = 80;  // GPT-3 2.7B
  EXPECT_EQ(s.attention_head_dim(), 128);
  EXPECT_TRUE(s.attention_padded());
}

TEST(SimTransformerShape, NormsSumTheResidualBiasGradientsUpToTheKernelsWidth) {
  TransformerShape s;
  s.bias = true;
  s.hidden = kNormSumsResidualBiasMaxHidden;  // 4096: one fused pass
  EXPECT_TRUE(s.residual_biases_from_norms());
  s.hidden = 5120;  // wider: proj's and fc2's bias gradients run on their own
  EXPECT_FALSE(s.residual_biases_from_norms());
  s.hidden = 2048;
  s.bias = false;  // nothing to sum
  EXPECT_FALSE(s.residual_biases_from_norms());
}

}  // namespace
}  // namespace sextant::sim
