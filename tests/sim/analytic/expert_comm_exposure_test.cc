// The exposed expert all-to-all under Megatron-Core's MoE overlaps
// (sim/analytic/expert_comm_exposure.h), on made-up block times in ms.
#include "sim/analytic/expert_comm_exposure.h"

#include <gtest/gtest.h>

namespace sextant::sim {
namespace {

// One MoE layer: forward attention 4, MLP 2.5 (shared expert 1 of it);
// backward attention 9, MLP 5; each all-to-all 4.1 (dispatch + combine 8.2 per pass).
PassTime layer() {
  PassTime t;
  t.attention_forward_s = 4;
  t.forward_s = 6.5;
  t.shared_expert_forward_s = 1;
  t.attention_backward_s = 9;
  t.backward_s = 14;
  return t;
}
LayerComm comm() {
  LayerComm c;
  c.ep_forward_s = 8.2;
  c.ep_backward_s = 8.2;
  return c;
}

TEST(ExpertCommExposure, WithoutOverlapEveryAllToAllShows) {
  ParallelLayout l;
  EXPECT_DOUBLE_EQ(exposed_expert_comm_s(layer(), comm(), l, 0, 1.0), 16.4);
  l.recompute = Recompute::kFull;  // the recomputed forward dispatches and combines again
  EXPECT_DOUBLE_EQ(exposed_expert_comm_s(layer(), comm(), l, 0, 1.0), 24.6);
}

TEST(ExpertCommExposure, SharedExpertHidesHalfOfItselfBehindEachForwardAllToAll) {
  ParallelLayout l;
  l.moe_shared_expert_overlap = true;
  // Forward: 2·max(0, 4.1 − 0.5) = 7.2; backward unchanged 8.2.
  EXPECT_NEAR(exposed_expert_comm_s(layer(), comm(), l, 0, 1.0), 15.4, 1e-12);
}

TEST(ExpertCommExposure, CombinedStepHidesEachAllToAllBehindTheOtherPassesBlock) {
  ParallelLayout l;
  l.moe_a2a_overlap = true;
  // Paired: backward dispatch beside forward attention max(0, 4.1 − 4) = 0.1;
  // forward dispatch beside backward MLP max(0, 4.1 − 5) = 0; backward combine
  // beside forward MLP max(0, 4.1 − 2.5) = 1.6; forward combine beside backward
  // attention max(0, 4.1 − 9) = 0: 1.7. A quarter of the passes unpaired:
  // 0.25·16.4 + 0.75·1.7 = 5.375.
  EXPECT_NEAR(exposed_expert_comm_s(layer(), comm(), l, 0, 0.25), 5.375, 1e-12);
}

TEST(ExpertCommExposure, UnpairedPassesByScheduleAndSplit) {
  ModelConfig m;
  m.num_layers = 16;
  ParallelLayout l;
  l.moe_a2a_overlap = true;
  l.dp = 1;
  l.gbs = 8;
  // pp = 1: the first forward and the last backward of 8 micro-batches.
  EXPECT_DOUBLE_EQ(unpaired_pass_fraction(l, pipeline_split(m, l)), 1.0 / 8);
  // Interleaved p = 4, v = 2, m = 8 (16 chunk-passes): mean warm-up over the
  // stages (p−1) + (v−1)p + 1 = 3 + 4 + 1 = 8 → 8/16.
  l.pp = 4;
  l.vpp = 2;
  l.schedule = Schedule::kInterleaved;
  EXPECT_DOUBLE_EQ(unpaired_pass_fraction(l, pipeline_split(m, l)), 0.5);
  l.moe_a2a_overlap = false;
  EXPECT_DOUBLE_EQ(unpaired_pass_fraction(l, pipeline_split(m, l)), 1.0);
}

}  // namespace
}  // namespace sextant::sim
