#include "sim/memory/activation_memory.h"

#include <gtest/gtest.h>

#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

// Korthikanti et al. 2022, Table 2: activation bytes per layer for GPT with
// dropout and the unfused attention the paper measured.
class KorthikantiTable2 : public ::testing::Test {
 protected:
  void SetUp() override {
    model = testing::gpt3_175b();
    layout.attention = AttentionKernel::kUnfused;
    layout.mbs = 1;
    layout.gbs = 1;
  }
  double sbh() const { return 2048.0 * layout.mbs * 12288.0; }
  double as_over_h() const { return 96.0 * 2048.0 / 12288.0; }
  ModelConfig model;
  ParallelLayout layout;
};

TEST_F(KorthikantiTable2, NoParallelism) {
  // sbh·(34 + 5·a·s/h)
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, layout, false, false),
                   sbh() * (34 + 5 * as_over_h()));
}

TEST_F(KorthikantiTable2, TensorParallel) {
  layout.tp = 8;
  // sbh·(10 + 24/t + 5·a·s/(h·t))
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, layout, false, false),
                   sbh() * (10 + 24.0 / 8 + 5 * as_over_h() / 8));
}

TEST_F(KorthikantiTable2, TensorAndSequenceParallel) {
  layout.tp = 8;
  layout.sp = true;
  // sbh/t·(34 + 5·a·s/h)
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, layout, false, false),
                   sbh() / 8 * (34 + 5 * as_over_h()));
}

TEST_F(KorthikantiTable2, TensorParallelSelectiveRecompute) {
  layout.tp = 8;
  layout.recompute = Recompute::kSelective;
  // sbh·(10 + 24/t)
  EXPECT_DOUBLE_EQ(stored_layer_activation_bytes(model, layout, false), sbh() * (10 + 24.0 / 8));
}

TEST_F(KorthikantiTable2, TensorSequenceParallelSelectiveRecompute) {
  layout.tp = 8;
  layout.sp = true;
  layout.recompute = Recompute::kSelective;
  // sbh·34/t
  EXPECT_DOUBLE_EQ(stored_layer_activation_bytes(model, layout, false), sbh() * 34 / 8);
}

TEST_F(KorthikantiTable2, FullRecomputeKeepsLayerInput) {
  layout.tp = 8;
  layout.recompute = Recompute::kFull;
  // 2·sbh (Sec. 4.3)
  EXPECT_DOUBLE_EQ(stored_layer_activation_bytes(model, layout, false), 2 * sbh());
}

TEST_F(KorthikantiTable2, FlashAttentionKeepsNoScoreMatrix) {
  layout.tp = 8;
  layout.sp = true;
  layout.attention = AttentionKernel::kFlash;
  // 34·sbh/t plus the fp32 log-sum-exp, 4 bytes per query row per head.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, layout, false, false),
                   sbh() * 34 / 8 + 4.0 * 2048 * 96 / 8);
}

// Narayanan et al. 2021 / Korthikanti et al. 2022 Sec. 4.2.3: under 1F1B the
// first stage holds p micro-batches of its L/p layers; interleaving multiplies
// that by 1 + (p−1)/(p·v); GPipe holds all m.
TEST(InflightMicrobatches, BySchedule) {
  ParallelLayout l;
  l.pp = 8;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = 64;  // m = 64
  l.schedule = Schedule::kOneFOneB;
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 8);
  l.schedule = Schedule::kInterleaved;
  l.vpp = 4;
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 8 * (1 + 7.0 / 32));
  l.schedule = Schedule::kGpipe;
  l.vpp = 1;
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 64);
  l.schedule = Schedule::kOneFOneB;
  l.gbs = 4;  // fewer micro-batches than stages
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 4);
}


// FP8 (Transformer Engine): the QKV and fc1 inputs (norm outputs) and fc2's
// input are kept in 1 byte instead of 2; the projection keeps an FP8 copy of
// the attention output beside flash attention's bf16 one. Flash attention, no
// dropout, GPT-3 175B at tp = 8 with sp: per layer the difference from bf16 is
// −sbh/t (QKV in) − sbh/t (fc1 in) − 4sbh/t (fc2 in, f = 4h) + sbh/t (proj) = −5sbh/t.
TEST(Fp8ActivationMemory, GemmInputsKeptInOneByte) {
  ModelConfig model = testing::gpt3_175b();
  model.hidden_dropout = model.attention_dropout = 0;
  ParallelLayout layout;
  layout.tp = 8;
  layout.sp = true;
  const double bf16 = layer_activation_bytes(model, layout, false, false);
  layout.precision = Precision::kFp8;
  const double fp8 = layer_activation_bytes(model, layout, false, false);
  const double sbh = 2048.0 * 12288.0;
  EXPECT_DOUBLE_EQ(bf16 - fp8, 5 * sbh / 8);
}

// The busiest expert-parallel rank stores expert_load_factor times the mean
// expert activations: fc1 input (h), fc1 output (2f, SwiGLU) and fc2 input (f)
// per routed token, 2 bytes each. Mixtral-like: h 4096, f 14336, top-2, mbs 1,
// s 4096: expert tokens 8192; factor 1.5 adds 0.5·8192·2·(4096 + 3·14336).
TEST(MoeActivationMemory, BusiestRankStoresItsLoadFactor) {
  ModelConfig model;
  model.num_layers = 32;
  model.hidden_size = 4096;
  model.ffn_hidden_size = 14336;
  model.num_attention_heads = 32;
  model.num_query_groups = 8;
  model.kv_channels = 128;
  model.vocab_size = 32000;
  model.seq_length = 4096;
  model.activation = Activation::kSwiglu;
  model.hidden_dropout = model.attention_dropout = 0;
  model.moe = MoeConfig{8, 2, 14336, 0, 0};
  ParallelLayout layout;
  layout.ep = 8;
  layout.dp = 8;
  const double balanced = layer_activation_bytes(model, layout, true, false);
  model.moe->expert_load_factor = 1.5;
  const double skewed = layer_activation_bytes(model, layout, true, false);
  EXPECT_DOUBLE_EQ(skewed - balanced, 0.5 * 8192.0 * 2.0 * (4096.0 + 3.0 * 14336.0));
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// moe_a2a_overlap keeps one more forward alive: with pp = 1 micro-batch i+1's
// forward runs beside i's backward (2 in flight, not 1); interleaved, Megatron
// adds one warm-up chunk-forward: p(1 + (p−1)/(p·v)) + 1/v = 4·(1 + 3/8) + 1/2 = 6.
TEST(InflightMicrobatches, MoeAllToAllOverlapKeepsOneMoreForward) {
  ParallelLayout l;
  l.dp = 1;
  l.gbs = 16;
  l.ep = 1;
  l.moe_a2a_overlap = true;
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 2.0);
  l.pp = 4;
  l.vpp = 2;
  l.schedule = Schedule::kInterleaved;
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 6.0);
  l.moe_a2a_overlap = false;
  EXPECT_DOUBLE_EQ(first_stage_inflight_microbatches(l), 5.5);
}

}  // namespace
}  // namespace sextant::sim
