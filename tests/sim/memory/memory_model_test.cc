#include "sim/memory/memory_model.h"

#include <gtest/gtest.h>

#include "sim/memory/parameter_count.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

// Megatron mixed precision with Adam: 2 + 4 + 12 = 18 bytes per parameter;
// the distributed optimizer: 6 + 12/d (Megatron-LM docs); ZeRO stages 2 and 3
// shard gradients and then weights (Rajbhandari et al. 2020, Fig. 1).
TEST(StateBytes, MegatronAndZeroStages) {
  const double d = 64;
  auto total = [](StateBytesPerParam s) { return s.parameters + s.gradients + s.optimizer_states; };
  EXPECT_DOUBLE_EQ(total(state_bytes_per_param(0, d)), 18);
  EXPECT_DOUBLE_EQ(total(state_bytes_per_param(1, d)), 6 + 12 / d);
  EXPECT_DOUBLE_EQ(total(state_bytes_per_param(2, d)), 2 + 16 / d);
  EXPECT_DOUBLE_EQ(total(state_bytes_per_param(3, d)), 18 / d);
}

// Narayanan et al. 2021, eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)),
// which counts LayerNorms, biases, learned positions and one tied embedding.
TEST(ParameterCount, Gpt3MatchesNarayananEquation2) {
  ModelConfig m = testing::gpt3_175b();
  m.tie_embeddings = true;
  const double l = 96, h = 12288, V = 51200, s = 2048;
  const double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  // The equation counts the final LayerNorm inside its 13/(12h) term only
  // approximately: agree to 1e-6.
  EXPECT_NEAR(total_params(m) / eq2, 1.0, 1e-6);
  EXPECT_NEAR(total_params(m), 174.6e9, 0.1e9);
}

// GPT-3 175B with tp=8, pp=16, dp=12, the distributed optimizer: a middle
// stage holds 6 layers of 12·h² + 13·h parameters split 8 ways (norms replicated).
TEST(StageMemory, Gpt3MiddleStageStates) {
  const ModelConfig m = testing::gpt3_175b();
  ParallelLayout l;
  l.tp = 8;
  l.pp = 16;
  l.dp = 12;
  l.mbs = 1;
  l.gbs = 1536;
  l.zero = 1;
  l.sp = true;
  l.recompute = Recompute::kSelective;
  const double h = 12288;
  const double per_layer_per_gpu = (12 * h * h + 9 * h) / 8 + 4 * h;  // attention+MLP(+biases)/t, norms
  const MemoryBreakdown mem = stage_memory(m, l, 5);
  EXPECT_NEAR(mem.parameters, 6 * per_layer_per_gpu * 2, 1.0);
  EXPECT_NEAR(mem.gradients, 6 * per_layer_per_gpu * 4, 1.0);
  EXPECT_NEAR(mem.optimizer_states, 6 * per_layer_per_gpu * 12 / 12, 1.0);
}

}  // namespace
}  // namespace sextant::sim
