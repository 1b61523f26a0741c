// The kernel-list behaviours a framework switches on (sim/core/framework_behaviour.h):
// the fused cross entropy and a separate gradient-accumulation pass.
#include <gtest/gtest.h>

#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

struct FrameworkKernels : ::testing::Test {
  ModelConfig model = testing::gpt3_175b();
  ClusterConfig cluster = testing::dgx_a100();
  CostProfile profile = testing::ideal_profile("a100-sxm-80gb");
  ParallelLayout layout = [] {
    ParallelLayout l;
    l.tp = 8;
    l.pp = 8;
    l.dp = 1;
    l.mbs = 1;
    l.gbs = 8;
    return l;
  }();
  DeviceRates rates(Precision precision = Precision::kBf16) const {
    return device_rates(cluster.gpu, profile, precision);
  }
};

// GPT-3 175B, tp 8, one sequence of 2048: 2048·51200/8 = 13,107,200 logits per
// GPU. Fused, the loss moves 22 bytes per logit forward (38 unfused) and 6
// backward (14), at the ideal profile's 2.039e12 B/s and no launch cost:
// forward 16·13107200/2.039e12 = 102.85 us less, backward 8·13107200/2.039e12 = 51.43 us.
TEST_F(FrameworkKernels, FusedCrossEntropyMovesFewerBytes) {
  const PassTime unfused = output_layer_time(model, layout, rates());
  profile.behaviour.cross_entropy = CrossEntropyKernel::kFused;
  const PassTime fused = output_layer_time(model, layout, rates());
  EXPECT_NEAR(unfused.forward_s - fused.forward_s, 16.0 * 13107200 / 2.039e12, 1e-12);
  EXPECT_NEAR(unfused.backward_s - fused.backward_s, 8.0 * 13107200 / 2.039e12, 1e-12);
}

// GPT-3 layer with biases: 12h² + 13h parameters (QKV 3h²+3h, projection h²+h,
// fc1 4h²+4h, fc2 4h²+h, two LayerNorms 4h), the norms replicated over tp:
// (12h² + 9h)/8 + 4h = 226,506,240 + 49,152 for h = 12288. bf16 (BF16_Optimizer):
// 12 bytes each per micro-batch, 12·226555392/2.039e12 = 1.3333 ms more backward,
// all of it weight-gradient work; fp16 (AccumulateGrad): 6 bytes, half that.
TEST_F(FrameworkKernels, SeparateAccumulationPassAddsToTheBackward) {
  const double h = 12288;
  const double local = (12 * h * h + 9 * h) / 8 + 4 * h;
  ASSERT_DOUBLE_EQ(local, 226555392.0);
  const PassTime fused = layer_time(model, layout, rates(), false);
  profile.behaviour.gradient_accumulation = GradientAccumulation::kSeparatePass;
  const PassTime bf16 = layer_time(model, layout, rates(), false);
  EXPECT_NEAR(bf16.backward_s - fused.backward_s, 12.0 * local / 2.039e12, 1e-12);
  EXPECT_NEAR(bf16.weight_gradient_s - fused.weight_gradient_s, 12.0 * local / 2.039e12, 1e-12);
  EXPECT_DOUBLE_EQ(bf16.forward_s, fused.forward_s);
  const PassTime fp16 = layer_time(model, layout, rates(Precision::kFp16), false);
  const PassTime fp16_fused = [&] {
    CostProfile p = profile;
    p.behaviour.gradient_accumulation = GradientAccumulation::kInWeightGradientGemm;
    return layer_time(model, layout, device_rates(cluster.gpu, p, Precision::kFp16), false);
  }();
  EXPECT_NEAR(fp16.backward_s - fp16_fused.backward_s, 6.0 * local / 2.039e12, 1e-12);
}

}  // namespace
}  // namespace sextant::sim
