// Where one stage's step time went, read off its timeline: the same four parts
// as the analytical model's breakdown (SimulationResult::time), so the two
// engines can be compared line by line.
//
// While the stage's compute stream runs, the time is compute (or the optimizer
// step). Each gap in it is split by what the next compute task waited for:
// its binding predecessor (the one that ended last), that task's binding
// predecessor, and so on back to the start of the gap. Time in this stage's
// own communication on that chain (a TP collective, a DP bucket, a blocking
// send) and in pipeline sends anywhere is exposed communication of that
// dimension; time in other stages' work is the pipeline bubble (waiting for
// the pipeline to fill or drain, or for a slower stage), as in the analytical
// model, whose bubble is other stages' whole time. After the stage's last
// task, communication of its own still running is exposed, the rest is bubble
// (waiting for the slowest stage to finish).
#pragma once

#include <array>

#include "sim/event/event_engine.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

struct StageBreakdown {
  double compute_s = 0;
  double optimizer_s = 0;
  std::array<double, kStreamKinds> exposed_s{};  // by stream; [kCompute] unused
  double bubble_s = 0;
  double exposed_communication_s() const;
};

StageBreakdown stage_breakdown(const Plan& plan, const Timeline& timeline, int stage);

}  // namespace sextant::sim
