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

// An MoE model's experts at the rows one expert gets: moe-mixtral-tiny (hidden
// 1024, 8 SwiGLU experts of 3584, top-2, seq 2048) and moe-fine-tiny (512, 128
// experts of 192, top-8).
TEST(CalibrationShapes, ExpertProductsAtTheirRowsPerExpert) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const std::vector<LinearShape> l =
      linear_shapes({catalog.model("moe-mixtral-tiny"), catalog.model("moe-fine-tiny")}, {});
  // The rows grid: powers of two and 1.5x them, 16 .. 16384.
  for (const long long rows : {16LL, 24LL, 96LL, 1536LL, 16384LL}) {
    EXPECT_TRUE(has(l, {rows, 1024, 7168})) << rows;  // mixtral fc1: 1024 -> 2 x 3584
    EXPECT_TRUE(has(l, {rows, 3584, 1024})) << rows;  // mixtral fc2
    EXPECT_TRUE(has(l, {rows, 512, 384})) << rows;    // fine-tiny fc1: 512 -> 2 x 192
    EXPECT_TRUE(has(l, {rows, 192, 512})) << rows;
  }
  EXPECT_FALSE(has(l, {8, 1024, 7168}));
  EXPECT_FALSE(has(l, {24576, 1024, 7168}));
  // Each micro-batch's mean rows: mixtral mbs 3 = 3·2048·2/8 = 1536 (on the grid), mbs 5 = 2560,
  // fine-tiny mbs 5 = 5·2048·8/128 = 640, mbs 7 = 896.
  EXPECT_TRUE(has(l, {2560, 1024, 7168}));
  EXPECT_TRUE(has(l, {2560, 3584, 1024}));
  EXPECT_TRUE(has(l, {640, 512, 384}));
  EXPECT_TRUE(has(l, {896, 192, 512}));
  // A dense model has none: GPT-1.3B has no 16-row product.
  EXPECT_FALSE(has(linear_shapes(presets(), {}), {16, 2048, 8192}));
}

TEST(CalibrationShapes, QuickIsASmallerSet) {
  EXPECT_LT(linear_shapes(presets(), {true}).size(), linear_shapes(presets(), {}).size() / 2 + 1);
  EXPECT_LT(attention_shapes(presets(), {true}).size(), attention_shapes(presets(), {}).size());
}

TEST(CalibrationShapes, AttentionAsTheEngineRunsIt) {
  const std::vector<AttentionShape> a = attention_shapes(presets(), {});
  auto has_a = [&](AttentionShape s) { return std::find(a.begin(), a.end(), s) != a.end(); };
  EXPECT_TRUE(has_a({4, 8, 8, 2048, 128}));   // GPT-1.3B: 16 heads / tp 2, mbs 4
  EXPECT_TRUE(has_a({8, 4, 1, 8192, 128}));   // Llama 3 8B: 32 heads / tp 8, mbs 8
  EXPECT_TRUE(has_a({32, 16, 16, 512, 64}));   // grid: 16384 tokens at seq 512
  EXPECT_TRUE(has_a({1, 64, 64, 16384, 128}));
}

std::vector<sim::ModelConfig> with_llama32_1b() {
  std::vector<sim::ModelConfig> m = presets();
  m.push_back(sim::PresetCatalog(SEXTANT_TEST_CONFIG_DIR).model("llama3.2-1b"));
  return m;
}

TEST(CalibrationShapes, AttentionAtEachModelsKeyValueHeads) {
  const std::vector<AttentionShape> a = attention_shapes(with_llama32_1b(), {});
  auto has_a = [&](AttentionShape s) { return std::find(a.begin(), a.end(), s) != a.end(); };
  // Llama 3 8B (32 heads, 8 kv heads, seq 8192) split as the engine splits it: 32/8 at tp 1, 16/4 at tp 2.
  EXPECT_TRUE(has_a({1, 32, 8, 8192, 128}));
  EXPECT_TRUE(has_a({2, 16, 4, 8192, 128}));
  EXPECT_FALSE(has_a({8, 32, 32, 8192, 128}));  // no longer measured as multi-head
  // Llama 3.2 1B: 32 heads over 8 kv heads of 64 dimensions.
  EXPECT_TRUE(has_a({4, 32, 8, 8192, 64}));
  // GPT-1.3B stays multi-head.
  EXPECT_TRUE(has_a({1, 16, 16, 2048, 128}));
  for (const AttentionShape& s : a) {
    EXPECT_GE(s.kv_heads, 1);
    EXPECT_EQ(s.heads % s.kv_heads, 0) << s.heads << " / " << s.kv_heads;
  }
}

TEST(CalibrationShapes, AttentionGridReachesContextParallelLengthsForEachGroupSize) {
  const std::vector<AttentionShape> a = attention_shapes(presets(), {});
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());
  auto has_a = [&](AttentionShape s) { return std::find(a.begin(), a.end(), s) != a.end(); };
  for (const int head_dim : {64, 128})
    for (const int heads : {16, 32, 64})
      for (const int kv_heads : {heads, heads / 4, heads / 8}) {  // MHA, groups 4 and 8
        // 32768 tokens at batch 1 (the longest): llama3.2-1b at 32k over cp 4 calls c = 4096 and 15.9k tokens.
        EXPECT_TRUE(has_a({1, heads, kv_heads, 32768, head_dim})) << heads << "/" << kv_heads << " d" << head_dim;
        EXPECT_TRUE(has_a({1, heads, kv_heads, 16384, head_dim}));
        // 16384 tokens at seq 4096 (batch 4), and batch 1 there too (context parallelism's calls).
        EXPECT_TRUE(has_a({4, heads, kv_heads, 4096, head_dim}));
        EXPECT_TRUE(has_a({1, heads, kv_heads, 4096, head_dim}));
        EXPECT_TRUE(has_a({32, heads, kv_heads, 512, head_dim}));
      }
  // Nothing longer than 32768 tokens, and the longest are batch 1.
  for (const AttentionShape& s : a) {
    EXPECT_LE(s.seq, 32768);
    if (s.seq > 16384) {
      EXPECT_EQ(s.batch, 1) << s.seq;
    }
  }
  // 2 head dims x 3 head counts x 3 groups at batch 1 for 7 sequences (512..32768) and at
  // batch 16384/seq for the 5 below 16384; the presets' shapes on this grid are grid points.
  const auto grid_points = std::count_if(a.begin(), a.end(), [](const AttentionShape& s) {
    return (s.heads == 16 || s.heads == 32 || s.heads == 64) && (s.batch == 1 || s.batch * s.seq == 16384);
  });
  EXPECT_EQ(grid_points, 7 * 2 * 3 * 3 + 5 * 2 * 3 * 3);
}

TEST(CalibrationShapes, QuickAttentionStillHasLlama32OneBGroupedAt32k) {
  const std::vector<AttentionShape> quick = attention_shapes(presets(), {true});
  auto has_q = [&](AttentionShape s) { return std::find(quick.begin(), quick.end(), s) != quick.end(); };
  // Llama 3.2 1B's 32 heads over 8 kv heads (group 4), head_dim 64, at 32768 tokens, without naming the model.
  EXPECT_TRUE(has_q({1, 32, 8, 32768, 64}));
  EXPECT_TRUE(has_q({1, 32, 4, 32768, 64}));    // group 8
  EXPECT_TRUE(has_q({1, 32, 32, 32768, 128}));  // multi-head
  EXPECT_TRUE(has_q({2, 16, 4, 8192, 128}));    // seq x4: 512, 2048, 8192, 32768
  EXPECT_FALSE(has_q({4, 16, 4, 4096, 128}));
  EXPECT_FALSE(has_q({1, 64, 64, 32768, 128}));  // quick: heads 16 and 32 only
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
