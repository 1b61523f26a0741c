// Which shapes `sextant calibrate` measures, from the model presets.
#include "engine/calibration/calibration_shapes.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/calibration/progress_bar.h"
#include "sim/core/preset_catalog.h"

namespace sextant::engine::calibration {
namespace {

std::vector<sim::ModelConfig> presets() {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  return {catalog.model("gpt-1.3b"), catalog.model("llama3-8b")};
}

bool has(const std::vector<LinearShape>& v, LinearShape s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(CalibrationShapes, LinearLayersOfThePresetsPerTensorParallelSizeAndMicroBatch) {
  const std::vector<LinearShape> l = linear_shapes(presets(), {});
  EXPECT_TRUE(std::is_sorted(l.begin(), l.end()));
  EXPECT_EQ(std::adjacent_find(l.begin(), l.end()), l.end());
  // GPT-1.3B (hidden 2048, ffn 8192, seq 2048), tp 2, mbs 3: 6144 tokens;
  // QKV 2048 -> 3·2048/2, projection 2048/2 -> 2048, fc1 2048 -> 8192/2, fc2 8192/2 -> 2048, head 51200/2.
  for (const LinearShape s : {LinearShape{6144, 2048, 3072}, LinearShape{6144, 1024, 2048},
                              LinearShape{6144, 2048, 4096}, LinearShape{6144, 4096, 2048},
                              LinearShape{6144, 2048, 25600}})
    EXPECT_TRUE(has(l, s)) << s.tokens << " " << s.in_width << " " << s.out_width;
  // Llama 3 8B, tp 8, mbs 1: QKV (32 + 2·8)·128 / 8 = 768, SwiGLU fc1 2·14336/8 = 3584, head: the
  // vocabulary 128256 padded to a multiple of 128·8 (129024), / 8 = 16128.
  EXPECT_TRUE(has(l, {8192, 4096, 768}));
  EXPECT_TRUE(has(l, {8192, 4096, 3584}));
  EXPECT_TRUE(has(l, {8192, 4096, 16128}));
  // Its unsplit head at mbs 8 would hold 65536 x 128256 = 8.4e9 logits (> 2^31): left out; at tp 8 it stays.
  EXPECT_FALSE(has(l, {65536, 4096, 128256}));
  EXPECT_TRUE(has(l, {65536, 4096, 16128}));
  // The grid: corners within 2^28 elements per operand.
  EXPECT_TRUE(has(l, {512, 512, 512}));
  EXPECT_TRUE(has(l, {65536, 2048, 2048}));
  EXPECT_FALSE(has(l, {65536, 8192, 512}));  // x = 65536 x 8192 = 2^29 elements
}

TEST(CalibrationShapes, QuickIsASmallerSet) {
  EXPECT_LT(linear_shapes(presets(), {true}).size(), linear_shapes(presets(), {}).size() / 2 + 1);
  EXPECT_LT(attention_shapes(presets(), {true}).size(), attention_shapes(presets(), {}).size());
}

TEST(CalibrationShapes, AttentionAsTheEngineRunsIt) {
  const std::vector<AttentionShape> a = attention_shapes(presets(), {});
  auto has_a = [&](AttentionShape s) { return std::find(a.begin(), a.end(), s) != a.end(); };
  EXPECT_TRUE(has_a({4, 8, 2048, 128}));   // GPT-1.3B: 16 heads / tp 2, mbs 4
  EXPECT_TRUE(has_a({8, 4, 8192, 128}));   // Llama 3 8B: 32 heads / tp 8, mbs 8
  EXPECT_TRUE(has_a({32, 16, 512, 64}));   // grid: 16384 tokens at seq 512
  EXPECT_TRUE(has_a({1, 64, 16384, 128}));
}

TEST(CalibrationShapes, ElementwiseGrids) {
  const auto adamw = elementwise_shapes("adamw", presets(), {});
  ASSERT_EQ(adamw.size(), 5u);  // 2^20, 2^22, ..., 2^28 parameters
  EXPECT_EQ(adamw.front().rows, 1);
  EXPECT_EQ(adamw.back().width, 1LL << 28);
  const auto ce = elementwise_shapes("cross_entropy", presets(), {});
  EXPECT_NE(std::find(ce.begin(), ce.end(), ElementwiseShape{2048, 128256}), ce.end());  // Llama 3's vocabulary
  for (const std::string& k : elementwise_kernel_names())
    for (const ElementwiseShape& s : elementwise_shapes(k, presets(), {})) EXPECT_LE(s.rows * s.width, 1LL << 28) << k;
  EXPECT_THROW(elementwise_shapes("softmax", presets(), {}), std::invalid_argument);
}

TEST(ProgressBar, LineShowsFractionStageAndTimeLeft) {
  EXPECT_EQ(ProgressBar::line(0.45, "linear", 212, 650, 121),
            "calibrate [#########-----------]  45%  linear 212/650  2m01s left");
  EXPECT_EQ(ProgressBar::format_duration(59.4), "59s");
}

}  // namespace
}  // namespace sextant::engine::calibration
