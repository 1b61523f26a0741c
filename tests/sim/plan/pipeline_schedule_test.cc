#include "sim/plan/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace sextant::sim {
namespace {

// "F0 F1 B0 ..." for compact comparison with the papers' figures.
std::string spell(const std::vector<PipelineOp>& ops) {
  std::string out;
  for (const PipelineOp& op : ops) {
    if (!out.empty()) out += ' ';
    switch (op.kind) {
      case PassKind::kForward: out += 'F'; break;
      case PassKind::kBackward: out += 'B'; break;
      case PassKind::kBackwardInput: out += 'b'; break;
      case PassKind::kBackwardWeight: out += 'W'; break;
    }
    if (op.chunk > 0) out += "c" + std::to_string(op.chunk) + ".";
    out += std::to_string(op.microbatch);
  }
  return out;
}

// Narayanan et al. 2021, Fig. 4 (top), 4 stages and 8 micro-batches: stage s
// runs p−s−1 = 3−s warm-up forwards, then alternates.
TEST(OneFOneB, MatchesNarayananFigure4) {
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kOneFOneB, 4, 1, 8, 0)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kOneFOneB, 4, 1, 8, 3)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kOneFOneB, 4, 1, 2, 0)), "F0 F1 B0 B1");
}

TEST(Gpipe, RunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kGpipe, 4, 1, 3, 2)), "F0 F1 F2 B0 B1 B2");
}

// Megatron-Core's interleaved schedule, p = 2, v = 2, m = 4: micro-batches go
// round in groups of p per chunk; stage 0 warms up with 2(p−1) + (v−1)p = 4
// chunk-forwards, stage 1 with 2.
TEST(Interleaved, MatchesMegatronOrder) {
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kInterleaved, 2, 2, 4, 0)),
            "F0 F1 Fc1.0 Fc1.1 F2 Bc1.0 F3 Bc1.1 Fc1.2 B0 Fc1.3 B1 Bc1.2 Bc1.3 B2 B3");
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kInterleaved, 2, 2, 4, 1)),
            "F0 F1 Fc1.0 Bc1.0 Fc1.1 Bc1.1 F2 B0 F3 B1 Fc1.2 Bc1.2 Fc1.3 Bc1.3 B2 B3");
}

TEST(Interleaved, WithAsManyMicroBatchesAsStagesRunsAllForwardsFirst) {
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kInterleaved, 2, 2, 2, 1)),
            "F0 F1 Fc1.0 Fc1.1 Bc1.0 Bc1.1 B0 B1");
}

TEST(Interleaved, NeedsMicroBatchesInGroupsOfPp) {
  EXPECT_THROW(stage_program(PipelineSchedule::kInterleaved, 4, 2, 6, 0), std::invalid_argument);
  EXPECT_THROW(stage_program(PipelineSchedule::kOneFOneB, 4, 2, 8, 0), std::invalid_argument);
}

// ZB-H1 (Qi et al. 2023, Fig. 3; their DeepSpeed ZeroBubbleH1Pipeline), 4
// stages, 6 micro-batches. Stage s defers s weight passes: the last stage
// runs F b then F b W, and the deferred W's fill its tail.
TEST(ZeroBubbleH1, DefersWeightGradientsOnLaterStages) {
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kZeroBubbleH1, 4, 1, 6, 0)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kZeroBubbleH1, 4, 1, 6, 3)),
            "F0 b0 F1 b1 F2 b2 F3 b3 W0 F4 b4 W1 F5 b5 W2 W3 W4 W5");
  EXPECT_EQ(spell(stage_program(PipelineSchedule::kZeroBubbleH1, 4, 1, 6, 1)),
            "F0 F1 F2 b0 F3 b1 W0 F4 b2 W1 F5 b3 W2 b4 W3 b5 W4 W5");
}

// Every schedule runs each (chunk, micro-batch) forward once, then its
// backward once (and W after b); W counts as the rest of the backward.
class EveryPassOnce
    : public ::testing::TestWithParam<std::tuple<PipelineSchedule, int, int, int>> {};

TEST_P(EveryPassOnce, ForwardBeforeBackward) {
  const auto [schedule, pp, vpp, m] = GetParam();
  for (int stage = 0; stage < pp; ++stage) {
    std::map<std::pair<int, int>, std::string> seen;
    for (const PipelineOp& op : stage_program(schedule, pp, vpp, m, stage)) {
      std::string& history = seen[{op.chunk, op.microbatch}];
      switch (op.kind) {
        case PassKind::kForward: EXPECT_EQ(history, ""); history += 'F'; break;
        case PassKind::kBackward: EXPECT_EQ(history, "F"); history += "bW"; break;
        case PassKind::kBackwardInput: EXPECT_EQ(history, "F"); history += 'b'; break;
        case PassKind::kBackwardWeight: EXPECT_EQ(history, "Fb"); history += 'W'; break;
      }
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(vpp * m));
    for (const auto& [key, history] : seen) EXPECT_EQ(history, "FbW");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, EveryPassOnce,
    ::testing::Values(std::make_tuple(PipelineSchedule::kGpipe, 4, 1, 8),
                      std::make_tuple(PipelineSchedule::kOneFOneB, 8, 1, 3),
                      std::make_tuple(PipelineSchedule::kOneFOneB, 8, 1, 64),
                      std::make_tuple(PipelineSchedule::kInterleaved, 8, 3, 96),
                      std::make_tuple(PipelineSchedule::kInterleaved, 4, 2, 4),
                      std::make_tuple(PipelineSchedule::kZeroBubbleH1, 8, 1, 64),
                      std::make_tuple(PipelineSchedule::kZeroBubbleH1, 8, 1, 3)));

}  // namespace
}  // namespace sextant::sim
