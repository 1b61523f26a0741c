// The critical path of a played Plan: the chain of tasks, each waiting for the
// one before (a dependency or its stream predecessor), that ends last. Its
// durations sum to the step time; shortening any other task does not shorten
// the step.
//
// The dependency graph (dependencies plus stream order) goes through
// Boost.Graph: a topological order, which also proves the plan acyclic, then
// the longest path over that order with each task's simulated duration
// (Cormen et al., "Introduction to Algorithms", Sec. 24.2, DAG shortest paths
// with negated weights). In the engine a task starts exactly when its last
// predecessor ends, so the longest path ends at the simulated step time.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/event/event_engine.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

/// Tasks in an order where each comes after its dependencies and its stream
/// predecessor. Throws std::logic_error naming a task on a cycle.
std::vector<std::uint32_t> topological_order(const Plan& plan);

/// The critical path, first task first.
std::vector<std::uint32_t> critical_path(const Plan& plan, const Timeline& timeline);

/// Where the critical path's time goes: seconds of its tasks on each stream,
/// and of the optimizer step (counted apart from its stream). They add up to
/// the path's length, the step time.
struct CriticalPathTime {
  std::array<double, kStreamKinds> stream_s{};
  double optimizer_s = 0;
};
CriticalPathTime critical_path_time(const Plan& plan, const Timeline& timeline,
                                    const std::vector<std::uint32_t>& path);

}  // namespace sextant::sim
