// Invariants of the step time and memory over the generated grid
// (invariant_grid.h): one test per model preset, looping over its layouts;
// each invariant states its reason, each failure names the model and layout.
#include <gtest/gtest.h>

#include "sim/analytic/analytic_model.h"
#include "sim/memory/memory_model.h"
#include "tests/sim/invariants/invariant_grid.h"

namespace sextant::testing {
namespace {

using sim::ParallelLayout;

double step_s(const GridCase& c, const ParallelLayout& l) {
  const GridHardware& h = grid_hardware();
  return sim::simulate_analytic(c.model, h.cluster, h.profile, l).step_time_s;
}

class StepInvariant : public ::testing::TestWithParam<std::string> {};

// Reason: an overlap only lets communication run beside compute; without it the
// same work runs in sequence, which can never end sooner.
TEST_P(StepInvariant, TurningAnOverlapOffNeverMakesAStepFaster) {
  for (const GridCase& c : grid_cases(GetParam())) {
    const double with_overlaps = step_s(c, c.layout);
    for (bool ParallelLayout::*flag : {&ParallelLayout::overlap_grad_reduce,
                                       &ParallelLayout::overlap_param_gather,
                                       &ParallelLayout::tp_comm_overlap}) {
      if (!(c.layout.*flag)) continue;
      ParallelLayout off = c.layout;
      off.*flag = false;
      if (!grid_valid(c.model, off)) continue;
      EXPECT_GE(step_s(c, off), with_overlaps * (1 - 1e-12))
          << c.describe() << " with " << off.to_spec();
    }
  }
}

// Reason: twice the micro-batches at a fixed layout repeat the same per-micro-batch
// work; only the once-per-step costs (bubble, fill and drain, optimizer, the
// last gradient sync) do not double, so the step grows, by at most 2x.
TEST_P(StepInvariant, DoublingTheGlobalBatchAtMostDoublesTheStep) {
  for (const GridCase& c : grid_cases(GetParam())) {
    ParallelLayout twice = c.layout;
    twice.gbs = 2 * c.layout.gbs;
    const double once_s = step_s(c, c.layout);
    const double twice_s = step_s(c, twice);
    EXPECT_GE(twice_s, once_s) << c.describe();
    EXPECT_LE(twice_s, 2.0 * once_s * (1 + 1e-12)) << c.describe();
  }
}

// Reason: a larger micro-batch holds more activations per micro-batch in flight
// and the same model states; with the micro-batch count fixed (gbs grows with
// it) the number in flight is unchanged.
TEST_P(StepInvariant, MemoryNeverDecreasesWhenMbsGrows) {
  int compared = 0;
  for (const GridCase& c : grid_cases(GetParam())) {
    ParallelLayout bigger = c.layout;
    bigger.mbs = 2 * c.layout.mbs;
    bigger.gbs = 2 * c.layout.gbs;
    if (!grid_valid(c.model, bigger)) continue;
    EXPECT_GE(sim::peak_memory_per_gpu(c.model, bigger).total(),
              sim::peak_memory_per_gpu(c.model, c.layout).total())
        << c.describe() << " with mbs=" << bigger.mbs;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

INSTANTIATE_TEST_SUITE_P(Grid, StepInvariant, ::testing::ValuesIn(grid_models()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return grid_model_name(info.param);
                         });

}  // namespace
}  // namespace sextant::testing
