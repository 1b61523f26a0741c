// Which measured attention table attention_times reads (sim/compute/kernel_costs.h):
// the call's group size (heads / kv_heads) where the profile measured it, else
// the multi-head table. A hand-built profile whose GQA rows take twice the
// multi-head time makes the choice visible.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/compute/kernel_costs.h"

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

}  // namespace
}  // namespace sextant::sim
