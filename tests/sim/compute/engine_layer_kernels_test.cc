// The engine's kernel list (sim/compute/engine_layer_kernels.cc) costed from
// the fixture profile, whose tables follow one rate each (see its header), so
// every kernel's time is a formula: linear forward 2·T·in·out / 600e12, flash
// attention forward 2·b·h·s²·d / 400e12, element-wise bytes / 2.8e12, and each
// measured kernel adds the graph's 1.5 µs gap. The fixture prints 7 significant
// digits, so sums agree to about 1e-7 of their size.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sim/compute/device_rates.h"
#include "sim/compute/gemm_time.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_kernels.h"
#include "sim/compute/prediction_interval.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "tests/sim/compute/engine_profile_fixture.h"

namespace sextant::sim {
namespace {

constexpr double kGap = 1.5e-6;
double gemm(double m, double k, double n) { return 2 * m * k * n / 600e12 + kGap; }
double bytes(double b) { return b / 2.8e12 + kGap; }

using Fixture = test_fixtures::EngineProfileFixture;
using test_fixtures::one_gpu;

TEST(EngineLayerKernels, Gpt13bLayerIsTheSumOfItsMeasuredKernels) {
  const Fixture f;
  const ModelConfig m = f.catalog.model("gpt-1.3b");  // h 2048, f 8192, 16 heads of 128, bias, GELU
  const PassTime t = layer_time(m, one_gpu(4), f.rates(), false);
  const double T = 4 * 2048;  // tokens
  const double norm_f = bytes(4 * T * 2048), norm_b = bytes(8 * T * 2048);
  // Forward: norm, QKV, flash attention (2·4·16·2048²·128 / 400e12 = 171.8 µs),
  // projection (+residual), norm, fc1 (+bias+GELU), fc2 (+residual): no other kernel.
  const double attention_f = 2.0 * 4 * 16 * 2048 * 2048 * 128 / 400e12 + kGap;
  // Epilogue traffic at the profile's 0.84·3.35e12 B/s: the residual (T, 2048)
  // read as C by the projection and fc2, GELU's input (T, 8192) written by fc1.
  const double hbm = 0.84 * 3.35e12, residual = 2.0 * T * 2048 / hbm, gelu = 2.0 * T * 8192 / hbm;
  const double forward = 2 * norm_f + gemm(T, 2048, 6144) + attention_f + gemm(T, 2048, 2048) +
                         residual + gemm(T, 2048, 8192) + gelu + gemm(T, 8192, 2048) + residual;
  EXPECT_NEAR(t.forward_s, forward, 1e-9);
  EXPECT_NEAR(t.forward_s, 1.676168e-3, 1e-8);  // the same sum, as a number
  // Backward: each GEMM's input gradient (1.05x) and weight gradient (1.10x),
  // flash backward (2.5x the forward's FLOPs at 330e12), two norm backwards and
  // the bias gradients of QKV and fc1 only (hidden 2048 <= 4096: the norms sum the others).
  auto grads = [](double m_, double k, double n) {
    const double g = 2 * m_ * k * n / 600e12;
    return 1.05 * g + 1.10 * g + 2 * kGap;
  };
  const double attention_b = 2.5 * (2.0 * 4 * 16 * 2048 * 2048 * 128) / 330e12 + kGap;
  // fc2's input gradient reads GELU's input back (DGELU epilogue).
  const double backward = 2 * norm_b + grads(T, 2048, 6144) + attention_b + grads(T, 2048, 2048) +
                          grads(T, 2048, 8192) + grads(T, 8192, 2048) + gelu +
                          bytes(2 * T * 6144) + bytes(2 * T * 8192);
  EXPECT_NEAR(t.backward_s, backward, 1e-9);
  // Full recomputation skips fc2's forward (the next layer's input is stored).
  EXPECT_NEAR(t.full_recompute_skipped_s, gemm(T, 8192, 2048) + residual, 1e-10);
  // Selective recomputation runs nothing again in the engine.
  EXPECT_EQ(t.attention_core_forward_s, 0.0);
}

TEST(EngineLayerKernels, OptimizerStepIsNormAdamGraphLaunchAndHost) {
  const Fixture f;
  // 1.3e9 parameters: norm 4 B and AdamW 30 B each at 2.8e12 B/s, two more
  // launches (clip factor, AdamW's second half), one graph launch, the host's step.
  const double p = 1.3e9;
  const double expected = bytes(4 * p) + bytes(30 * p) + 2 * kGap + 1.2e-5 + 2.0e-4;
  EXPECT_NEAR(optimizer_step_time_s(p, f.rates()), expected, 1e-8);  // 16.004 ms
  EXPECT_NEAR(expected, 16.0037e-3, 1e-7);
}

TEST(EngineLayerKernels, FallsBackToTheRooflineOutsideTheTables) {
  const Fixture f;
  const DeviceRates r = f.rates();
  // 1024 tokens is below the table's smallest 2048: the roofline GEMM of gemm_time.h.
  const LinearTimes below = linear_times(1024, 2048, 2048, 1, r);
  EXPECT_DOUBLE_EQ(below.forward_s, gemm_time_s({1024, 2048, 2048, 1, false}, r.gemm_flops_per_s, r));
  // 32768 tokens is above the largest 16384: the rate at 16384, twice the time (plus one gap).
  EXPECT_NEAR(linear_times(32768, 2048, 2048, 1, r).forward_s,
              2 * (gemm(16384, 2048, 2048) - kGap) + kGap, 1e-10);
  // Inside: the table's rate.
  EXPECT_NEAR(linear_times(16384, 2048, 2048, 1, r).forward_s, gemm(16384, 2048, 2048), 1e-10);
}

TEST(EngineLayerKernels, SoftwarePicksTheKernelList) {
  Fixture f;
  const ModelConfig m = f.catalog.model("gpt-1.3b");
  const PassTime engine = layer_time(m, one_gpu(4), f.rates(), false);
  f.profile.software = Software::kMegatronPublished;
  const PassTime megatron = layer_time(m, one_gpu(4), f.rates(), false);
  // Same GEMMs and attention from the tables; Megatron adds its GELU and two
  // dropout-add kernels (bytes at the 0.84·3.35e12 roofline) and its norms
  // count 4 bytes per element, so it is slower in the forward.
  EXPECT_GT(megatron.forward_s, engine.forward_s);
  // The engine's GEMMs carry their epilogues' traffic besides: 2·(T, 2048)
  // residual reads and the (T, 8192) GELU input at 0.84·3.35e12 B/s = 71.5 µs.
  const double T = 8192, epilogues = (2 * 2.0 * T * 2048 + 2.0 * T * 8192) / (0.84 * 3.35e12);
  EXPECT_NEAR(engine.gemm_forward_s - megatron.gemm_forward_s, epilogues, 1e-10);
}

// Dense layers stay where they were before the MoE block came (values printed
// by the code at 87b5196, from the fixture and from the measured H100 profile of 2026-11-23, kept in tests/data,
// mbs 2): a dense model must not move.
TEST(EngineLayerKernels, DenseLayersUnchangedByTheMoeBlock) {
  const Fixture f;
  const CostProfile h100 =
      load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/h100-sxm-80gb-measured-2026-11-23.yaml");
  const DeviceRates fixture = f.rates();
  const DeviceRates measured = device_rates(f.gpu, h100, Precision::kBf16);
  struct Case {
    const DeviceRates* rates;
    const char* model;
    double forward_s, backward_s, weight_gradient_s, skipped_s;
  };
  const Case cases[] = {
      {&fixture, "llama3.2-1b", 0.0052303844315774711, 0.012086382671069863,
       0.0036595861974116468, 0.00094160791037668909},
      {&fixture, "gpt-1.3b", 0.00084333395467613061, 0.0018709959277621716,
       0.00076191421000000288, 0.00023652700259416579},
      {&measured, "llama3.2-1b", 0.0039947194324153543, 0.010482295919827817,
       0.0024364090558772148, 0.00063116740000000043},
      {&measured, "gpt-1.3b", 0.00063797233280714165, 0.0014543044012528283,
       0.00054607960000000041, 0.00015606739999999945},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const PassTime t = layer_time(f.catalog.model(c.model), one_gpu(2), *c.rates, false);
    EXPECT_EQ(t.forward_s, c.forward_s);
    EXPECT_EQ(t.backward_s, c.backward_s);
    EXPECT_EQ(t.weight_gradient_s, c.weight_gradient_s);
    EXPECT_EQ(t.full_recompute_skipped_s, c.skipped_s);
  }
}

TEST(PredictionInterval, NinetyPercentFromTheFitsResidualSd) {
  CostProfile p;
  EXPECT_FALSE(step_time_interval_s(0.1, p));
  p.fit = ProfileFit{"runs", {{"compute_time_factor", 1.0}, {"step_overhead_s", 0.0},
                              {"microbatch_overhead_s", 0.0}}, 0.02, 12};
  // 12 runs − 3 parameters = 9 degrees of freedom: t(0.95, 9) = 1.8331;
  // half-width 1.8331·0.02 = 0.036662 in log: [0.1·e^−0.036662, 0.1·e^0.036662].
  EXPECT_NEAR(t_quantile(0.90, 9), 1.83311, 1e-5);
  const auto interval = step_time_interval_s(0.1, p);
  ASSERT_TRUE(interval);
  EXPECT_NEAR(interval->first, 0.0964002, 1e-6);
  EXPECT_NEAR(interval->second, 0.1037342, 1e-6);
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// The fused-epilogue table: where it covers a shape, a GEMM with an epilogue
// takes the fused kernel's measured time (plus the graph gap); elsewhere the
// plain product plus the epilogue's bytes at the HBM rate.
TEST(FusedLinearTimes, UsesTheMeasuredEpilogueKernelWhereTheTableCoversTheShape) {
  std::ifstream file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
  std::stringstream text;
  text << file.rdbuf()
       << "linear_bf16_epilogues:\n  - [8192, 8192, 2048, 1.0e-4, 2.0e-4, 3.0e-4, 4.0e-4, 5.0e-4]\n";
  const PresetCatalog catalog{SEXTANT_TEST_CONFIG_DIR};
  const CostProfile profile = load_profile_text(text.str(), "tiny+epilogues.yaml");
  const DeviceRates r = device_rates(catalog.gpu("h100-sxm-80gb"), profile, Precision::kBf16);
  LinearEpilogues fc2;
  fc2.forward = ForwardEpilogue::kBiasResidual;
  fc2.input_gradient = InputGradientEpilogue::kGeluBackward;
  fc2.forward_extra_bytes = 2.0 * 8192 * 2048;
  fc2.input_gradient_extra_bytes = 2.0 * 8192 * 8192;
  const LinearTimes fused = fused_linear_times(8192, 8192, 2048, fc2, r);
  EXPECT_NEAR(fused.forward_s, 3.0e-4 + kGap, 1e-12);
  EXPECT_NEAR(fused.input_gradient_s, 5.0e-4 + kGap, 1e-12);
  // The weight gradient has no epilogue: the plain table's 1.10 x 2·8192·8192·2048 / 600e12.
  EXPECT_NEAR(fused.weight_gradient_s, 1.10 * (gemm(8192, 8192, 2048) - kGap) + kGap, 1e-9);
  LinearEpilogues qkv;
  qkv.forward = ForwardEpilogue::kBias;
  EXPECT_NEAR(fused_linear_times(8192, 8192, 2048, qkv, r).forward_s, 1.0e-4 + kGap, 1e-12);

  // Below the table's smallest tokens (4096 < 8192): the plain product plus the residual's
  // 2·4096·2048 bytes (5.96 µs) at the profile's HBM rate (0.84 x 3.35e12 B/s), and the
  // saved GELU input's 2·4096·8192 bytes (23.8 µs) on the input gradient.
  fc2.forward_extra_bytes = 2.0 * 4096 * 2048;
  fc2.input_gradient_extra_bytes = 2.0 * 4096 * 8192;
  const LinearTimes plain = linear_times(4096, 8192, 2048, 1, r);
  const LinearTimes fallback = fused_linear_times(4096, 8192, 2048, fc2, r);
  EXPECT_NEAR(fallback.forward_s - plain.forward_s, 2.0 * 4096 * 2048 / (0.84 * 3.35e12), 1e-12);
  EXPECT_NEAR(fallback.input_gradient_s - plain.input_gradient_s, 2.0 * 4096 * 8192 / (0.84 * 3.35e12), 1e-12);
  EXPECT_DOUBLE_EQ(fallback.weight_gradient_s, plain.weight_gradient_s);
  // Without an epilogue the fused table is not read.
  EXPECT_NEAR(fused_linear_times(8192, 8192, 2048, {}, r).forward_s, gemm(8192, 8192, 2048), 1e-9);
}

}  // namespace
}  // namespace sextant::sim
