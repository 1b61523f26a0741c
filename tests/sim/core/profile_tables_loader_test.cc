// Strict reading of a measured profile (PROFILE_SCHEMA.md): the fixture
// tests/data/profiles/engine-measured-tiny.yaml, and the exact messages of bad input.
#include "sim/core/profile_tables_loader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

const std::string kFixture = std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";

// The scalar part every profile has (17 keys, one line each).
const char* const kScalars = testing::kScalarProfileYaml;

std::string error_of(const std::string& text) {
  try {
    load_profile_text(text, "p.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileTablesLoader, ReadsTheFixture) {
  const CostProfile p = load_profile_file(kFixture);
  EXPECT_EQ(p.software, Software::kSextantEngine);
  ASSERT_TRUE(p.tables);
  // 3 token counts x 5 in widths x 5 out widths; 3 batches x 2 head counts x 2 head dims.
  EXPECT_EQ(p.tables->linear_bf16.size(), 75u);
  EXPECT_TRUE(p.tables->linear_fp8.empty());
  EXPECT_EQ(p.tables->attention.size(), 12u);
  EXPECT_EQ(p.tables->elementwise[static_cast<int>(ElementwiseKernel::kAdamw)].size(), 3u);
  ASSERT_TRUE(p.tables->overheads);
  EXPECT_DOUBLE_EQ(p.tables->overheads->graph_kernel_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(p.tables->overheads->host_step_s, 2.0e-4);
  EXPECT_EQ(p.tables->measurement.size(), 11u);
  EXPECT_FALSE(p.fit);
  // The grid answers at a measured row: 2·8192·2048·6144 / 600e12 = 343.597 µs.
  const auto qkv = p.tables->lookup.linear_bf16.lookup({8192, 2048, 6144, 0}, 8192.0 * 2048 * 6144);
  ASSERT_TRUE(qkv);
  EXPECT_NEAR((*qkv)[0], 343.597e-6, 1e-9);
}

TEST(ProfileTablesLoader, DatasheetProfilesAreMegatronPublished) {
  EXPECT_EQ(load_profile_text(kScalars, "p.yaml").software, Software::kMegatronPublished);
  const CostProfile h100 =
      load_profile_file(std::string(SEXTANT_TEST_CONFIG_DIR) + "/profiles/h100-sxm-80gb.yaml");
  EXPECT_EQ(h100.software, Software::kMegatronPublished);
  EXPECT_FALSE(h100.tables);
}

TEST(ProfileTablesLoader, ReadsTheFitBlock) {
  const CostProfile p = load_profile_text(std::string(kScalars) + R"y(software: sextant-engine
fit:
  data_set: "reports/measurements/x (12 runs)"
  parameters: {compute_time_factor: 1.04, step_overhead_s: 3.0e-4, microbatch_overhead_s: 2.0e-5}
  log_residual_sd: 0.02
  runs: 12
)y", "p.yaml");
  ASSERT_TRUE(p.fit);
  EXPECT_DOUBLE_EQ(p.fit->parameter(kFitComputeTimeFactor, 1), 1.04);
  EXPECT_DOUBLE_EQ(p.fit->parameter(kFitMicrobatchOverhead, 0), 2.0e-5);
  EXPECT_EQ(p.fit->runs, 12);
  EXPECT_DOUBLE_EQ(p.fit->log_residual_sd, 0.02);
}

TEST(ProfileTablesLoader, NamesUnknownKeysAndBadRowsWithTheirPosition) {
  // Line 18 is the first after the 17 scalar lines.
  EXPECT_EQ(error_of(std::string(kScalars) + "software: pytorch\n"),
            "p.yaml:18:11: software: got 'pytorch'; accepted: sextant-engine, megatron-published");
  EXPECT_EQ(error_of(std::string(kScalars) + "elementwise:\n  layernorm_fwd: []\n"),
            "p.yaml:19:3: elementwise.layernorm_fwd: unknown key; accepted keys: layernorm_forward, "
            "layernorm_backward, rmsnorm_forward, rmsnorm_backward, gelu_forward, swiglu_forward, "
            "swiglu_backward, rope_forward, rope_backward, embedding_forward, embedding_backward, "
            "cross_entropy, bias_gradient, residual_add, adamw, grad_norm");
  EXPECT_EQ(error_of(std::string(kScalars) + "linear_bf16:\n  - [8192, 2048, 6144, 1e-4, 1e-4]\n"),
            "p.yaml:19:5: linear_bf16: expected a row of 6 numbers [tokens, in_width, out_width, "
            "forward_s, input_gradient_s, weight_gradient_s]");
  EXPECT_EQ(error_of(std::string(kScalars) + "attention:\n  - [4, 16, 2048, 128, 2e-4, -5e-4]\n"),
            "p.yaml:19:30: attention: times must be in (0, 3600) s, got -5e-4 [batch, heads, seq, "
            "head_dim, forward_s, backward_s]");
  EXPECT_EQ(error_of(std::string(kScalars) + "overheads:\n  kernel_launch_s: 2e-6\n  graph_kernel_s: 1e-6\n"
                                             "  graph_launch_s: 1e-5\n  host_step_s: 1e-4\n  gpu_sync_s: 1e-5\n"),
            "p.yaml:23:3: overheads.gpu_sync_s: unknown key; accepted keys: kernel_launch_s, "
            "graph_kernel_s, graph_launch_s, host_step_s");
}

// attention_gqa: optional rows naming their kv_heads; one lookup table per group size.
TEST(ProfileTablesLoader, ReadsGroupedQueryAttentionRows) {
  const CostProfile p = load_profile_text(std::string(kScalars) + R"y(software: sextant-engine
attention:
  - [1, 32, 4096, 64, 1.0e-3, 3.0e-3]
attention_gqa:
  - [1, 32, 8, 4096, 64, 1.1e-3, 4.0e-3]
  - [1, 64, 8, 4096, 128, 2.0e-3, 6.0e-3]
)y", "p.yaml");
  ASSERT_TRUE(p.tables);
  const std::vector<AttentionPoint>& a = p.tables->attention;
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].kv_heads, 32);  // an attention: row is multi-head
  EXPECT_EQ(a[1].kv_heads, 8);
  EXPECT_EQ(a[1].seq, 4096);
  EXPECT_DOUBLE_EQ(a[1].backward_s, 4.0e-3);
  EXPECT_EQ(a[2].heads, 64);
  EXPECT_EQ(a[2].kv_heads, 8);
  const auto& tables = p.tables->lookup.attention;
  ASSERT_EQ(tables.size(), 3u);  // groups 1, 4 (32/8) and 8 (64/8)
  EXPECT_EQ(tables.begin()->first, 1);
  EXPECT_EQ(tables.rbegin()->first, 8);
}

// Every profile written before attention_gqa existed loads as it did: all its rows multi-head.
TEST(ProfileTablesLoader, ProfilesWithoutGroupedRowsHaveOnlyTheMultiHeadTable) {
  const CostProfile p = load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) +
                                          "/profiles/h100-sxm-80gb-measured-2026-11-23.yaml");
  ASSERT_TRUE(p.tables);
  EXPECT_EQ(p.tables->attention.size(), 73u);
  for (const AttentionPoint& a : p.tables->attention) EXPECT_EQ(a.kv_heads, a.heads);
  ASSERT_EQ(p.tables->lookup.attention.size(), 1u);
  EXPECT_EQ(p.tables->lookup.attention.begin()->first, 1);
}

// The committed H200 profile (calibrated 2026-11-28 with the GQA grid): 102
// multi-head rows and the GQA rows of groups 4 and 8, and llama3.2-1b's own
// group of 4 (32 heads over 8), each group its own table.
TEST(ProfileTablesLoader, TheH200ProfileHasTablesForItsMeasuredGroups) {
  const CostProfile p = load_profile_file(std::string(SEXTANT_TEST_CONFIG_DIR) +
                                          "/profiles/measured/h200-sxm-141gb.yaml");
  ASSERT_TRUE(p.tables);
  std::size_t multi_head = 0;
  for (const AttentionPoint& a : p.tables->attention) multi_head += a.kv_heads == a.heads ? 1 : 0;
  EXPECT_EQ(multi_head, 102u);
  EXPECT_GT(p.tables->attention.size(), multi_head);
  const auto& tables = p.tables->lookup.attention;
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables.count(1), 1u);
  EXPECT_EQ(tables.count(4), 1u);
  EXPECT_EQ(tables.count(8), 1u);
}

TEST(ProfileTablesLoader, GroupedRowsNeedFewerKeyValueHeadsThatDivideTheHeads) {
  EXPECT_EQ(error_of(std::string(kScalars) + "attention_gqa:\n  - [1, 32, 32, 4096, 64, 1e-3, 3e-3]\n"),
            "p.yaml:19:5: attention_gqa: kv_heads (32) must be fewer than heads (32) and divide them "
            "(kv_heads = heads: a row of attention:) [batch, heads, kv_heads, seq, head_dim, forward_s, "
            "backward_s]");
  EXPECT_EQ(error_of(std::string(kScalars) + "attention_gqa:\n  - [1, 32, 5, 4096, 64, 1e-3, 3e-3]\n"),
            "p.yaml:19:5: attention_gqa: kv_heads (5) must be fewer than heads (32) and divide them "
            "(kv_heads = heads: a row of attention:) [batch, heads, kv_heads, seq, head_dim, forward_s, "
            "backward_s]");
  EXPECT_EQ(error_of(std::string(kScalars) + "attention_gqa:\n  - [1, 32, 8, 4096, 64, 1e-3]\n"),
            "p.yaml:19:5: attention_gqa: expected a row of 7 numbers [batch, heads, kv_heads, seq, head_dim, "
            "forward_s, backward_s]");
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// A quoted cell is a string, as a quoted scalar is everywhere else (issue 29, item 10).
TEST(ProfileTablesLoader, AQuotedCellIsNotANumber) {
  EXPECT_EQ(error_of(std::string(kScalars) + "linear_bf16:\n  - [\"8192\", 2048, 6144, 1e-4, 1e-4, 1e-4]\n"),
            "p.yaml:19:6: linear_bf16: expected a finite number in row [tokens, in_width, out_width, "
            "forward_s, input_gradient_s, weight_gradient_s]");
}

}  // namespace
}  // namespace sextant::sim
