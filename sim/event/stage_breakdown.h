// Where one stage's step time went, read off its timeline: the same four parts
// as the analytical model's breakdown (SimulationResult::time), so the two
// engines can be compared line by line.
//
// Each instant of [0, step time) on the stage's representative rank counts as
//  - compute, when its compute stream runs a layer, embedding or output task;
//  - optimizer, when it runs the optimizer step;
//  - exposed communication of a dimension, when compute is idle and that
//    dimension's stream runs (several at once: the first of TP, CP, EP, PP, DP);
//  - pipeline bubble otherwise: the rank waits for another stage (fill and
//    drain, or a slower stage) with nothing of its own running.
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
