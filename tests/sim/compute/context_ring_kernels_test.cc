// The engine's ring attention core step by step (sim/compute/context_ring_kernels.h),
// from the fixture profile (tests/data/profiles/engine-measured-tiny.yaml):
// a call of P (query, key) pairs is the square causal call of sqrt(2P)
// tokens, forward 2·h·(2P)·d / 400e12 s, backward 2.5x at 330e12 (the table's
// one rate, also beyond its 2048 tokens), plus the 1.5 us gap; a memory pass
// moves its bytes at 0.84·3.35e12 B/s plus the gap. The fixture prints 7
// significant digits: sums agree to about 1e-7 of their size.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/comm/context_ring_overlap.h"
#include "sim/compute/context_ring_kernels.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_kernels.h"
#include "tests/sim/compute/engine_profile_fixture.h"

namespace sextant::sim {
namespace {

constexpr double kGap = 1.5e-6;
constexpr double kHeads = 16, kDim = 128;
double forward_call(double pairs) { return 4 * kHeads * pairs * kDim / 400e12 + kGap; }
double backward_call(double pairs) { return 2.5 * 4 * kHeads * pairs * kDim / 330e12 + kGap; }
double pass(double bytes) { return bytes / (0.84 * 3.35e12) + kGap; }

// One sequence of 32768 tokens, 16 heads of 128 (MHA), cp = 4: chunks of c = 4096.
TEST(ContextRingKernels, StepsOfTheRingFromItsCalls) {
  const test_fixtures::EngineProfileFixture f;
  const RingAttentionTimes t = ring_attention_times(1, kHeads, kHeads, 32768, kDim, 4, f.rates());
  const double c = 4096, W = kHeads * kDim;  // width of q, out, and of K, V (MHA)
  // Step 0: q0 x k0 causal (c²/2 pairs), q1 x [k0 k1] causal (1.5·c²); two first merges
  // (bf16 partial 2 + LSE 4 read, fp32 out 4 + LSE 4 written per row: 6W + 8h bytes).
  const double merge_first = c * (6 * W + 8 * kHeads), merge = c * (10 * W + 12 * kHeads);
  EXPECT_NEAR(t.forward.first_step_s,
              forward_call(c * c / 2) + forward_call(1.5 * c * c) + 2 * pass(merge_first), 1e-9);
  // Later steps: two c x c calls (and merges) cost more than one c x 2c call of the same pairs.
  const double two_calls = 2 * (forward_call(c * c) + pass(merge));
  ASSERT_GT(two_calls, forward_call(2 * c * c) + pass(merge));
  EXPECT_NEAR(t.forward.step_s, two_calls, 1e-9);
  EXPECT_NEAR(t.forward.step_s, 753.3742e-6, 1e-9);  // the same, as a number
  // After the last step: the fp32 out (2c rows) rounded to bf16, 6 bytes per element.
  EXPECT_NEAR(t.forward.finish_s, pass(6 * 2 * c * W), 1e-9);
  // Backward: dQ into fp32 (first 6, then 10 B per element), dK and dV of the call's keys (10 B).
  const double dq_first = 6 * c * W, dq = 10 * c * W;
  EXPECT_NEAR(t.backward.first_step_s,
              backward_call(c * c / 2) + backward_call(1.5 * c * c) + 2 * pass(dq_first) +
                  pass(2 * c * W * 10) + pass(2 * 2 * c * W * 10),
              1e-9);
  EXPECT_NEAR(t.backward.step_s, 2 * (backward_call(c * c) + pass(dq) + pass(2 * c * W * 10)), 1e-9);
  EXPECT_NEAR(t.backward.finish_s, 3 * pass(6 * 2 * c * W), 1e-9);
  // Every step computes 2·c² pairs: the ring's calls hold the causal whole
  // sequence's S²/2 over the cp ranks (each: c²/2 + 1.5c² + 3·2c² = 8c² = 32768²/2/4).
  EXPECT_DOUBLE_EQ(c * c / 2 + 1.5 * c * c + 3 * 2 * c * c, 32768.0 * 32768 / 2 / 4);
}

// The engine's layer under cp_comm_type=p2p costs the ring core and hands its
// steps to the overlap (one home for both engines).
TEST(ContextRingKernels, EngineLayerCostsTheRingUnderP2p) {
  const test_fixtures::EngineProfileFixture f;
  ModelConfig m = f.catalog.model("gpt-1.3b");  // 16 heads of 128
  m.seq_length = 32768;
  ParallelLayout l = test_fixtures::one_gpu(1);
  l.cp = 4;
  l.cp_comm_type = CpCommType::kP2p;
  const PassTime ring = layer_time(m, l, f.rates(), false);
  const RingAttentionTimes steps = ring_attention_times(1, 16, 16, 32768, 128, 4, f.rates());
  EXPECT_DOUBLE_EQ(ring.ring_forward.step_s, steps.forward.step_s);
  EXPECT_DOUBLE_EQ(ring.attention_core_run_forward_s, steps.forward.total_s(4));
  EXPECT_DOUBLE_EQ(ring.attention_core_backward_s, steps.backward.total_s(4));
  EXPECT_EQ(ring.attention_core_forward_s, 0.0);  // selective recomputation reruns nothing
  // The all-gather variant: no steps; its core is the two chunk calls.
  l.cp_comm_type = CpCommType::kAllGather;
  const PassTime gather = layer_time(m, l, f.rates(), false);
  EXPECT_EQ(gather.ring_forward.step_s, 0.0);
  const AttentionTimes calls = all_gather_attention_times(1, 16, 16, 32768, 128, 4, f.rates());
  EXPECT_DOUBLE_EQ(gather.attention_core_run_forward_s, calls.forward_s);
  // Its chunk 2cp−1 call is c·sqrt(4cp − 1) tokens' square causal call.
  EXPECT_NEAR(calls.forward_s, forward_call(4096.0 * 4096 / 2) + forward_call(4096.0 * 4096 * 7.5), 1e-9);
}

}  // namespace
}  // namespace sextant::sim
