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

}  // namespace
}  // namespace sextant::sim
