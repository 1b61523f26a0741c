// How much of the context-parallel exchange the core hides
// (sim/comm/context_ring_overlap.h), on hand-made step times.
#include <gtest/gtest.h>

#include "sim/comm/context_ring_overlap.h"

namespace sextant::sim {
namespace {

// cp = 4: [K | V] exchange 10, dK/dV hop 20; forward steps 8 then 12, backward 15 then 25.
TEST(ContextRingOverlap, EngineRingHidesEachExchangeBehindItsOwnStep) {
  PassTime t;
  t.ring_forward = {8, 12, 1};
  t.ring_backward = {15, 25, 2};
  LayerComm c;
  c.cp_kv_exchange_s = 10;
  c.cp_gradient_exchange_s = 20;
  const ContextRingTimes exposed = context_ring_exposed(t, c, 4);
  // Forward: beside step 0 (8) 2 shows; beside steps 1, 2 (12) nothing; step 3 has none.
  EXPECT_DOUBLE_EQ(exposed.forward_s, 2);
  // Backward: step 0 hides 10; steps 1, 2 show 10 + 20 − 25 = 5 each; step 3
  // hides the hop of 20; the hop home (20) shows.
  EXPECT_DOUBLE_EQ(exposed.backward_s, 0 + 2 * 5 + 0 + 20);
  // The plan's ring task spans the core (8 + 3·12 + 1 = 45; 15 + 3·25 + 2 = 92) and the rest.
  const ContextRingTimes task = context_ring_task(t, c, 4);
  EXPECT_DOUBLE_EQ(task.forward_s, 45 + 2);
  EXPECT_DOUBLE_EQ(task.backward_s, 92 + 30);
}

TEST(ContextRingOverlap, TwoRanksHaveNoMiddleSteps) {
  PassTime t;
  t.ring_forward = {8, 12, 0};
  t.ring_backward = {15, 25, 0};
  LayerComm c;
  c.cp_kv_exchange_s = 10;
  c.cp_gradient_exchange_s = 30;
  const ContextRingTimes exposed = context_ring_exposed(t, c, 2);
  EXPECT_DOUBLE_EQ(exposed.forward_s, 2);               // one exchange, beside step 0
  EXPECT_DOUBLE_EQ(exposed.backward_s, 0 + 5 + 30);     // K/V beside step 0, hop beside step 1, hop home
}

TEST(ContextRingOverlap, MegatronRingHidesBehindTheWholeCore) {
  PassTime t;
  t.attention_core_run_forward_s = 5;
  LayerComm c;
  c.cp_forward_s = 9;
  c.cp_backward_s = 18;
  // As the analytic model always costed it: forward behind the core, backward behind twice its forward.
  const ContextRingTimes exposed = context_ring_exposed(t, c, 4);
  EXPECT_DOUBLE_EQ(exposed.forward_s, 4);
  EXPECT_DOUBLE_EQ(exposed.backward_s, 8);
  const ContextRingTimes task = context_ring_task(t, c, 4);
  EXPECT_DOUBLE_EQ(task.forward_s, 9);
  EXPECT_DOUBLE_EQ(task.backward_s, 18);
  // The all-gather variant hides nothing.
  c.cp_overlaps_core = false;
  EXPECT_DOUBLE_EQ(context_ring_exposed(t, c, 4).forward_s, 9);
  EXPECT_DOUBLE_EQ(context_ring_exposed(t, c, 4).backward_s, 18);
  EXPECT_DOUBLE_EQ(context_ring_exposed(t, c, 1).backward_s, 0);  // no cp
}

}  // namespace
}  // namespace sextant::sim
