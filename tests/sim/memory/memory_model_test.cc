#include "sim/memory/memory_model.h"

#include <gtest/gtest.h>

#include "sim/memory/activation_memory.h"
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

namespace sextant::sim {
namespace {

// With uneven stages the heaviest stage decides, not the first or the last:
// 16 layers at pp=4 with one layer on each end leave 7 on ranks 1 and 2.
// 1F1B with m ≥ p: rank 1 holds p − 1 = 3 micro-batches of its 7 layers
// (Narayanan et al. 2021, Fig. 4), 21 layer-micro-batches against rank 0's 4
// (plus the embedding's mask) and rank 3's 1 (plus the logits).
TEST(MemoryModel, HeaviestStageDecides) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = 16;
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = 4;
  l.mbs = 1;
  l.gbs = 16;
  l.recompute = Recompute::kSelective;
  l.first_stage_layers = 1;
  l.last_stage_layers = 1;
  const MemoryBreakdown peak = peak_memory_per_gpu(m, l);
  const MemoryBreakdown rank1 = stage_memory(m, l, 1);
  EXPECT_DOUBLE_EQ(peak.total(), rank1.total());
  EXPECT_GT(rank1.total(), stage_memory(m, l, 0).total());
  EXPECT_GT(rank1.total(), stage_memory(m, l, 3).total());
  EXPECT_DOUBLE_EQ(rank1.activations, 21 * stored_layer_activation_bytes(m, l, false));
  // 7 layers' weights: 18 bytes per parameter without the distributed optimizer.
  EXPECT_DOUBLE_EQ(rank1.parameters + rank1.gradients + rank1.optimizer_states,
                   18 * stage_params_per_gpu(m, l, 1).total());
  EXPECT_DOUBLE_EQ(stage_params_per_gpu(m, l, 1).total(),
                   7 * ((layer_params(m, false).attention + layer_params(m, false).dense_mlp) / 8 +
                        layer_params(m, false).norms));
}


// Gradients in bf16 (grad_reduce_in_fp32=0, or fp16 precision): 2 bytes per
// parameter instead of 4, unsharded below ZeRO-2. GPT-3 175B at tp 8, pp 16:
// the gradient buffer halves.
TEST(MemoryModel, Bf16GradientsHalveTheGradientBuffer) {
  const ModelConfig m = testing::gpt3_175b();
  ParallelLayout l;
  l.tp = 8;
  l.pp = 16;
  l.dp = 1;
  l.gbs = 16;
  l.zero = 1;
  const double fp32 = peak_memory_per_gpu(m, l).gradients;
  l.grad_reduce_in_fp32 = false;
  EXPECT_DOUBLE_EQ(peak_memory_per_gpu(m, l).gradients, fp32 / 2);
  l.grad_reduce_in_fp32 = true;
  l.precision = Precision::kFp16;
  EXPECT_DOUBLE_EQ(peak_memory_per_gpu(m, l).gradients, fp32 / 2);
}

}  // namespace
}  // namespace sextant::sim
