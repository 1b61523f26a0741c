// A tiny calibration on the GPU: every number positive, larger work slower,
// and the largest GEMM between 40 % and 100 % of the datasheet's dense bf16
// peak (a rate outside means the timing, not the GPU, is wrong). Skips without
// a GPU; fails instead under SEXTANT_REQUIRE_GPU=1.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "engine/calibration/calibration_run.h"
#include "engine/calibration/device_info.h"
#include "engine/calibration/profile_writer.h"
#include "sim/core/gpu_preset_name.h"
#include "sim/core/preset_catalog.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::calibration {
namespace {

using CalibrationGpuTest = kernels::testing::GpuTest;

// The presets: the source tree's, or ./configs where the binaries were copied
// to another machine and run from a checkout's root.
std::string config_dir() {
  return std::filesystem::is_directory(SEXTANT_TEST_CONFIG_DIR) ? SEXTANT_TEST_CONFIG_DIR : "configs";
}

CalibrationPlan tiny_plan() {
  CalibrationPlan plan;
  plan.linear = {{1024, 1024, 1024}, {2048, 2048, 2048}, {8192, 8192, 8192}};
  plan.attention = {{1, 16, 16, 512, 128}, {1, 16, 16, 2048, 128}, {2, 16, 16, 1024, 64}, {2, 16, 16, 4096, 64}};
  for (const std::string& k : elementwise_kernel_names()) {
    std::vector<ElementwiseShape> shapes = {{2048, 2048}, {32768, 2048}};  // 16x the bytes
    if (k == "rope_forward" || k == "rope_backward") shapes = {{2048, 6144}, {32768, 6144}};
    if (k == "cross_entropy") shapes = {{512, 32768}, {8192, 32768}};
    if (k == "adamw" || k == "grad_norm") shapes = {{1, 1 << 20}, {1, 1 << 24}};
    plan.elementwise.emplace_back(k, shapes);
  }
  plan.nccl = false;
  return plan;
}

TEST_F(CalibrationGpuTest, TinyCalibrationIsPositiveMonotoneAndNearThePeak) {
  CalibrationSettings settings;
  settings.progress = false;
  settings.command_line = "calibration_gpu_test";
  std::ostringstream progress;
  const MeasuredProfile p = run_calibration(tiny_plan(), settings, progress);

  ASSERT_EQ(p.linear_bf16.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const LinearPoint& l = p.linear_bf16[i];
    for (const double t : {l.forward_s, l.input_gradient_s, l.weight_gradient_s}) {
      EXPECT_GT(t, 0.0);
      EXPECT_LT(t, 1.0);
    }
    if (i > 0) {  // 8x the FLOPs of the row before
      const LinearPoint& s = p.linear_bf16[i - 1];
      EXPECT_GT(l.forward_s, s.forward_s);
      EXPECT_GT(l.input_gradient_s, s.input_gradient_s);
      EXPECT_GT(l.weight_gradient_s, s.weight_gradient_s);
    }
  }
  ASSERT_EQ(p.attention.size(), 4u);
  for (const AttentionPoint& a : p.attention) {
    EXPECT_GT(a.forward_s, 0.0);
    EXPECT_GT(a.backward_s, a.forward_s);  // 2.5x the forward's FLOPs (FlashAttention-2, Sec. 3)
  }
  // 4x the sequence: 16x the causal FLOPs.
  EXPECT_GT(p.attention[1].forward_s, p.attention[0].forward_s);
  EXPECT_GT(p.attention[1].backward_s, p.attention[0].backward_s);
  EXPECT_GT(p.attention[3].forward_s, p.attention[2].forward_s);
  EXPECT_GT(p.attention[3].backward_s, p.attention[2].backward_s);

  ASSERT_EQ(p.elementwise.size(), elementwise_kernel_names().size());
  for (const ElementwiseTable& t : p.elementwise) {
    ASSERT_EQ(t.points.size(), 2u) << t.kernel;
    EXPECT_GT(t.points[0].seconds, 0.0) << t.kernel;
    EXPECT_GT(t.points[1].seconds, t.points[0].seconds) << t.kernel << ": 16x the bytes";
  }
  const Overheads& o = p.overheads;
  for (const double t : {o.kernel_launch_s, o.graph_kernel_s, o.host_step_s}) {
    EXPECT_GT(t, 0.0);
    EXPECT_LT(t, 1e-3);
  }
  EXPECT_GE(o.graph_launch_s, 0.0);

  EXPECT_FALSE(p.measurement.gpu_name.empty());
  EXPECT_FALSE(p.measurement.commit.empty());
  EXPECT_EQ(p.measurement.nccl_version, "");

  // The YAML holds every point.
  const YAML::Node y = YAML::Load(profile_yaml(p));
  EXPECT_EQ(y["linear_bf16"].size(), 3u);
  EXPECT_EQ(y["attention"].size(), 4u);
  EXPECT_EQ(y["elementwise"]["adamw"].size(), 2u);

  // The largest GEMM: 2 x 8192^3 = 1.0995e12 FLOPs per product.
  const DeviceInfo info = device_info(0);
  const std::string preset = sim::gpu_preset_name(info.name, info.memory_bytes);
  if (preset.empty()) GTEST_SKIP() << "no datasheet preset for '" << info.name << "': peak unknown";
  const double peak = sim::PresetCatalog(config_dir()).gpu(preset).peak_bf16_flops_per_s;
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  const LinearPoint& big = p.linear_bf16.back();
  for (const double t : {big.forward_s, big.input_gradient_s, big.weight_gradient_s}) {
    const double fraction = flops / t / peak;
    EXPECT_GE(fraction, 0.40) << flops / t / 1e12 << " TFLOP/s of " << peak / 1e12;
    EXPECT_LE(fraction, 1.00) << flops / t / 1e12 << " TFLOP/s of " << peak / 1e12;
  }
}

// Grouped-query attention runs the engine's GQA kernels at the shape's kv_heads
// and is written apart (attention_gqa). Llama 3.2 1B's 32 heads over 8 kv heads
// (head_dim 64) at 4096 tokens, multi-head beside it, and at 32768 tokens (the
// longest calibrate measures: 64x the 4096-token causal work per head).
TEST_F(CalibrationGpuTest, GroupedQueryAttentionIsMeasuredAtItsKeyValueHeads) {
  CalibrationPlan plan;
  plan.attention = {{1, 32, 8, 4096, 64}, {1, 32, 32, 4096, 64}, {1, 32, 8, 32768, 64}};
  plan.nccl = false;
  CalibrationSettings settings;
  settings.progress = false;
  settings.command_line = "calibration_gpu_test";
  std::ostringstream progress;
  const MeasuredProfile p = run_calibration(plan, settings, progress);
  ASSERT_EQ(p.attention.size(), 3u) << p.measurement.method;  // none refused by the launcher
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p.attention[i].kv_heads, plan.attention[i].kv_heads);
    EXPECT_GT(p.attention[i].forward_s, 0.0);
    EXPECT_GT(p.attention[i].backward_s, p.attention[i].forward_s);
  }
  // 64x the work: at least 16x the time (saturated at both, up to launch effects).
  EXPECT_GT(p.attention[2].forward_s, 16 * p.attention[0].forward_s);
  EXPECT_GT(p.attention[2].backward_s, 16 * p.attention[0].backward_s);
  const YAML::Node y = YAML::Load(profile_yaml(p));
  ASSERT_EQ(y["attention"].size(), 1u);
  ASSERT_EQ(y["attention_gqa"].size(), 2u);
  EXPECT_EQ(y["attention_gqa"][0][2].as<int>(), 8);
  EXPECT_EQ(y["attention_gqa"][1][3].as<int>(), 32768);
}

}  // namespace
}  // namespace sextant::engine::calibration
