// Which measured attention table attention_times reads (sim/compute/kernel_costs.h):
// the call's group size (heads / kv_heads) where the profile measured it, else
// the multi-head table. A hand-built profile whose GQA rows take twice the
// multi-head time makes the choice visible.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_time.h"
#include "tests/sim/compute/engine_profile_fixture.h"

namespace sextant::sim {
namespace {

// Causal work per call, b·heads·s²·d (what the tables interpolate time per).
double work(double batch, double heads, double seq, double head_dim) { return batch * heads * seq * seq * head_dim; }

// Every multi-head row at 1 ns per 1e6 units of work forward, 3 ns backward;
// the group-4 rows at twice those: the rates are constant, so any covered
// lookup returns rate x work exactly (log_grid_table.h: a constant rate is reproduced).
constexpr double kForwardSPerWork = 1e-15, kBackwardSPerWork = 3e-15;

MeasuredTables tables_with(bool group_4_rows) {
  MeasuredTables t;
  for (const double heads : {16.0, 32.0})
    for (const double seq : {1024.0, 2048.0, 4096.0, 8192.0, 16384.0}) {
      const double w = work(1, heads, seq, 64);
      t.attention.push_back({1, heads, heads, seq, 64, kForwardSPerWork * w, kBackwardSPerWork * w});
      // The GQA grid starts at 2048 tokens: at 1024 only the multi-head table covers a shape.
      if (group_4_rows && seq >= 2048)
        t.attention.push_back({1, heads, heads / 4, seq, 64, 2 * kForwardSPerWork * w, 2 * kBackwardSPerWork * w});
    }
  t.build_lookup();
  return t;
}

DeviceRates rates_of(const MeasuredTables& t) {
  DeviceRates r;
  r.tables = &t;
  r.measured_kernel_gap_s = 0;
  r.compute_time_factor = 1;
  return r;
}

TEST(AttentionTimes, GroupedQueryCallReadsItsGroupsTable) {
  const MeasuredTables t = tables_with(true);
  const DeviceRates r = rates_of(t);
  // Llama 3.2 1B's 32 heads over 8 kv heads (group 4) at 4096 tokens: 2 x the multi-head rate.
  const double w = work(1, 32, 4096, 64);
  const AttentionTimes gqa = attention_times(1, 32, 8, 4096, 64, 1, r);
  EXPECT_NEAR(gqa.forward_s, 2 * kForwardSPerWork * w, 1e-9 * gqa.forward_s);
  EXPECT_NEAR(gqa.backward_s, 2 * kBackwardSPerWork * w, 1e-9 * gqa.backward_s);
  EXPECT_TRUE(gqa.measured_at_group);
  // Between measured rows (24 heads, 12k tokens): still the group's rate.
  const AttentionTimes between = attention_times(1, 24, 6, 12000, 64, 1, r);
  EXPECT_NEAR(between.forward_s, 2 * kForwardSPerWork * work(1, 24, 12000, 64), 1e-9 * between.forward_s);
}

TEST(AttentionTimes, MultiHeadCallReadsTheMultiHeadTable) {
  const MeasuredTables t = tables_with(true);
  const AttentionTimes mha = attention_times(1, 32, 32, 4096, 64, 1, rates_of(t));
  EXPECT_NEAR(mha.forward_s, kForwardSPerWork * work(1, 32, 4096, 64), 1e-9 * mha.forward_s);
  EXPECT_NEAR(mha.backward_s, kBackwardSPerWork * work(1, 32, 4096, 64), 1e-9 * mha.backward_s);
  EXPECT_FALSE(mha.measured_at_group);
}

TEST(AttentionTimes, UnmeasuredGroupOrShapeFallsBackToTheMultiHeadTable) {
  const MeasuredTables t = tables_with(true);
  const DeviceRates r = rates_of(t);
  // Group 8 (32 / 4) was not measured: multi-head rate.
  const AttentionTimes group_8 = attention_times(1, 32, 4, 4096, 64, 1, r);
  EXPECT_NEAR(group_8.forward_s, kForwardSPerWork * work(1, 32, 4096, 64), 1e-9 * group_8.forward_s);
  EXPECT_FALSE(group_8.measured_at_group);
  // Group 4 below its table's shortest sequence (2048): the multi-head table's 1024-token rows.
  const AttentionTimes short_seq = attention_times(1, 32, 8, 1024, 64, 1, r);
  EXPECT_NEAR(short_seq.forward_s, kForwardSPerWork * work(1, 32, 1024, 64), 1e-9 * short_seq.forward_s);
  EXPECT_FALSE(short_seq.measured_at_group);
}

TEST(AttentionTimes, ProfileWithoutGroupedRowsCostsGroupedCallsAsMultiHead) {
  const MeasuredTables t = tables_with(false);
  const AttentionTimes gqa = attention_times(1, 32, 8, 4096, 64, 1, rates_of(t));
  EXPECT_NEAR(gqa.forward_s, kForwardSPerWork * work(1, 32, 4096, 64), 1e-9 * gqa.forward_s);
  EXPECT_NEAR(gqa.backward_s, kBackwardSPerWork * work(1, 32, 4096, 64), 1e-9 * gqa.backward_s);
  EXPECT_FALSE(gqa.measured_at_group);
}

// Context parallelism's all-gather calls are costed from the same group's table:
// 16384 tokens over cp 2, c = 4096: calls of 4096 and 4096·sqrt(7) = 10837 tokens.
TEST(AttentionTimes, AllGatherCallsReadTheGroupsTable) {
  const MeasuredTables t = tables_with(true);
  const AttentionTimes a = all_gather_attention_times(1, 32, 8, 16384, 64, 2, rates_of(t));
  const double c = 4096, long_call = c * std::sqrt(7.0);
  const double expected = 2 * kForwardSPerWork * (work(1, 32, c, 64) + work(1, 32, long_call, 64));
  EXPECT_NEAR(a.forward_s, expected, 1e-9 * expected);
  EXPECT_TRUE(a.measured_at_group);
}

// The engine's GQA backward at head_dim 64 expands K and V to every query head
// when its blocks would underfill the GPU; the simulator adds those copies to a
// multi-head table's time, but a table measured at the model's group holds them.
// Llama 3.2 1B (32 heads over 8, d 64) at 2048 tokens, mbs 1 on an H100:
// 8 kv heads x 16 key blocks = 128 blocks < 132 SMs, so the generic backward
// expands (the H100's own compute capability, 9.0, runs the Hopper backward,
// which does not: the test after this one).
TEST(AttentionTimes, GroupTableHoldsTheBackwardsKeyValueExpansion) {
  test_fixtures::EngineProfileFixture f;
  f.gpu.compute_capability = 8.0;  // a device without the engine's sm_90a backward
  ModelConfig m = f.catalog.model("llama3.2-1b");
  m.seq_length = 2048;
  const ParallelLayout l = test_fixtures::one_gpu(1);
  const PassTime multi_head_only = layer_time(m, l, f.rates(), false);
  // The same profile plus group-4 rows as fast as the multi-head ones: only the copies differ.
  auto tables = std::make_shared<MeasuredTables>(*f.profile.tables);
  for (const AttentionPoint& p : f.profile.tables->attention)
    tables->attention.push_back({p.batch, p.heads, p.heads / 4, p.seq, p.head_dim, p.forward_s, p.backward_s});
  tables->build_lookup();
  CostProfile with_group = f.profile;
  with_group.tables = tables;
  const PassTime grouped = layer_time(m, l, device_rates(f.gpu, with_group, Precision::kBf16), false);
  EXPECT_NEAR(grouped.forward_s, multi_head_only.forward_s, 1e-15);
  // Copies left out: K, V in (2·T·8·64 bytes each) and out per query head (2·T·32·64), then dK, dV
  // per query head in and summed out, at the fixture's 0.84 x 3.35e12 B/s plus the 1.5 µs gap each.
  const double T = 2048, narrow = 2 * T * 8 * 64, expanded = 2 * T * 32 * 64;
  const double copies = 2 * ((2 * narrow + 2 * expanded) / (0.84 * 3.35e12) + 1.5e-6);
  EXPECT_NEAR(multi_head_only.backward_s - grouped.backward_s, copies, 1e-12);
}

// On compute capability 9.0 the engine's Hopper backward reads each group's K
// and V itself (kernels/flash_attention_backward.cu): the multi-head table's time,
// no copies; a preset that does not state its capability keeps them.
TEST(AttentionTimes, HopperBackwardCopiesNothing) {
  test_fixtures::EngineProfileFixture f;
  ASSERT_DOUBLE_EQ(f.gpu.compute_capability, 9.0);  // configs/gpus/h100-sxm-80gb.yaml
  ModelConfig m = f.catalog.model("llama3.2-1b");
  m.seq_length = 2048;
  const ParallelLayout l = test_fixtures::one_gpu(1);
  const PassTime hopper = layer_time(m, l, f.rates(), false);
  f.gpu.compute_capability = 0;
  const PassTime unstated = layer_time(m, l, f.rates(), false);
  EXPECT_NEAR(hopper.forward_s, unstated.forward_s, 1e-15);
  const double T = 2048, narrow = 2 * T * 8 * 64, expanded = 2 * T * 32 * 64;
  const double copies = 2 * ((2 * narrow + 2 * expanded) / (0.84 * 3.35e12) + 1.5e-6);
  EXPECT_NEAR(unstated.backward_s - hopper.backward_s, copies, 1e-12);
}

}  // namespace
}  // namespace sextant::sim
