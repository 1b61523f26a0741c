#include "engine/model/transformer_shape.h"

#include <gtest/gtest.h>

namespace sextant::engine {
namespace {

sim::ModelConfig gpt_like() {
  // GPT-3 1.3B's widths: h 2048, 16 heads of 128, ffn 8192, vocab 51200, seq 2048.
  sim::ModelConfig m;
  m.num_layers = 24;
  m.hidden_size = 2048;
  m.ffn_hidden_size = 8192;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.kv_channels = 128;
  m.vocab_size = 51200;
  m.seq_length = 2048;
  return m;
}

TEST(TransformerShape, OneGpuIsTheWholeModel) {
  const TransformerShape s = transformer_shape_of(gpt_like(), 4, 1024);
  EXPECT_EQ(s.heads, 16);
  EXPECT_EQ(s.ffn_hidden, 8192);
  EXPECT_EQ(s.qkv_width(), 3 * 2048);
  EXPECT_EQ(s.seq, 1024);  // the seq_length argument overrides the model's
  EXPECT_EQ(s.tokens(), 4 * 1024);
}

TEST(TransformerShape, ATensorParallelRankHoldsItsShard) {
  // tp=2, cp=2: 16/2 = 8 heads (QKV 3·8·128 = 3072 columns), ffn 8192/2 = 4096,
  // 2048/2 = 1024 tokens of each sequence; the hidden size stays 2048.
  sim::ParallelLayout l;
  l.tp = 2, l.cp = 2, l.mbs = 2;
  const TransformerShape s = transformer_shape_of(gpt_like(), l);
  EXPECT_EQ(s.heads, 8);
  EXPECT_EQ(s.kv_heads, 8);
  EXPECT_EQ(s.qkv_width(), 3072);
  EXPECT_EQ(s.ffn_hidden, 4096);
  EXPECT_EQ(s.fc1_width(), 4096);
  EXPECT_EQ(s.hidden, 2048);
  EXPECT_EQ(s.seq, 1024);
  EXPECT_EQ(s.tokens(), 2 * 1024);
}

// cp_comm_type reaches the shape, which picks the attention core
// (engine/transformer/attention.cc): the layout's value, whichever it is; a
// shape built by hand runs the engine's default, the all-gather.
TEST(TransformerShape, CarriesTheLayoutsContextParallelExchange) {
  sim::ParallelLayout l;
  l.cp = 2;
  l.cp_comm_type = sim::CpCommType::kP2p;
  EXPECT_EQ(transformer_shape_of(gpt_like(), l).cp_comm_type, sim::CpCommType::kP2p);
  l.cp_comm_type = sim::CpCommType::kAllGather;
  EXPECT_EQ(transformer_shape_of(gpt_like(), l).cp_comm_type, sim::CpCommType::kAllGather);
  EXPECT_EQ(TransformerShape{}.cp_comm_type, sim::CpCommType::kAllGather);
}

TEST(TransformerShape, VocabularyAndSequenceParallelShards) {
  // GPT-like, vocab 51200 = 128·400: at tp = 4 a multiple of 128·4 = 512
  // already (51200 / 512 = 100), so 12800 rows per rank. Under sp the norms
  // run on mbs·seq / tp = 2·2048 / 4 = 1024 tokens per rank.
  sim::ParallelLayout l;
  l.tp = 4, l.mbs = 2, l.sp = true;
  const TransformerShape s = transformer_shape_of(gpt_like(), l);
  EXPECT_EQ(s.tp, 4);
  EXPECT_TRUE(s.sequence_parallel);
  EXPECT_EQ(s.vocab, 12800);
  EXPECT_EQ(s.vocab_start(3), 3 * 12800);
  EXPECT_EQ(s.tokens(), 4096);
  EXPECT_EQ(s.norm_tokens(), 1024);
  EXPECT_TRUE(transformer_shape_problems(s, gpt_like()).empty());

  // Llama-3's 128256 = 128·1002 at tp = 4: padded to a multiple of 512,
  // ceil(128256 / 512)·512 = 251·512 = 128512, so 32128 rows per rank.
  sim::ModelConfig llama = gpt_like();
  llama.vocab_size = 128256;
  EXPECT_EQ(transformer_shape_of(llama, l).vocab, 32128);
  // sp without tp splits nothing; tp without sp keeps every token's norm.
  l.tp = 1;
  EXPECT_FALSE(transformer_shape_of(gpt_like(), l).sequence_parallel);
  EXPECT_EQ(transformer_shape_of(llama, l).vocab, 128256);  // tp = 1: the preset's size as it is
  l.tp = 2, l.sp = false;
  EXPECT_EQ(transformer_shape_of(gpt_like(), l).norm_tokens(), 4096);
}

TEST(TransformerShape, SequenceParallelNeedsTokensDivisibleByTp) {
  // mbs 1 x seq 1002 tokens over tp = 4: 1002 % 4 = 2, refused by name.
  sim::ModelConfig m = gpt_like();
  m.seq_length = 1002;
  sim::ParallelLayout l;
  l.tp = 4, l.sp = true;
  const std::vector<std::string> problems = transformer_shape_problems(transformer_shape_of(m, l), m);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("multiple of tp"), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace sextant::engine

namespace sextant::engine {
namespace {

TEST(TransformerShape, MultiHeadLatentAttentionIsRefusedNamingIt) {
  sim::ModelConfig m = gpt_like();
  m.mla = sim::MlaConfig{512, 256, 64, 32, 64};
  m.kv_channels = 96;
  const std::vector<std::string> problems =
      transformer_shape_problems(transformer_shape_of(m, 1, 1024), m);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "multi-head latent attention (mla: q_lora_rank, kv_lora_rank, ...): the engine builds "
            "standard and grouped-query attention only; simulate this model instead of running it");
}

}  // namespace
}  // namespace sextant::engine

namespace sextant::engine {
namespace {

// The logits (tokens, vocab) may pass 2^31 elements (the cross entropy offsets
// rows in 64 bits); the layers' rows may not. gpt_like's fc1 row is 8192 wide:
// 7 x 32,768 tokens fit (1.9e9 elements), 8 reach 2^31 and do not.
TEST(TransformerShape, TokensAreBoundByTheWidestLayerRowNotTheVocabulary) {
  sim::ModelConfig m = gpt_like();
  m.vocab_size = 128256;  // Llama 3's: 32,768 tokens x 128,256 = 4.2e9 logits
  EXPECT_TRUE(transformer_shape_problems(transformer_shape_of(m, 1, 32768), m).empty());
  EXPECT_TRUE(transformer_shape_problems(transformer_shape_of(m, 7, 32768), m).empty());
  const std::vector<std::string> problems = transformer_shape_problems(transformer_shape_of(m, 8, 32768), m);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "micro-batch x sequence (262144 tokens) x the widest row (8192) exceeds 2^31 elements; lower the "
            "micro-batch");
}

}  // namespace
}  // namespace sextant::engine
