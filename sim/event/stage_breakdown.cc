#include "sim/event/stage_breakdown.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace sextant::sim {

double StageBreakdown::exposed_communication_s() const {
  return std::accumulate(exposed_s.begin(), exposed_s.end(), 0.0);
}

StageBreakdown stage_breakdown(const Plan& plan, const Timeline& timeline, int stage) {
  // Each stream's tasks, in the order (and so the time order) it ran them.
  std::array<std::vector<std::uint32_t>, kStreamKinds> streams;
  for (std::uint32_t t = plan.stage_begin[static_cast<std::size_t>(stage)];
       t < plan.stage_begin[static_cast<std::size_t>(stage) + 1]; ++t) {
    streams[static_cast<std::size_t>(plan.tasks[t].stream)].push_back(t);
  }
  // Sweep the stage's time line, boundary to boundary, merging the streams.
  std::array<std::size_t, kStreamKinds> next{};  // first task not yet ended, per stream
  StageBreakdown out;
  double now = 0;
  const double end = timeline.step_time_s;
  while (now < end) {
    double boundary = end;
    int running_comm = -1;
    bool computing = false, optimizing = false;
    for (std::size_t s = 0; s < kStreamKinds; ++s) {
      const std::vector<std::uint32_t>& tasks = streams[s];
      while (next[s] < tasks.size() && timeline.end_s[tasks[next[s]]] <= now) ++next[s];
      if (next[s] == tasks.size()) continue;
      const std::uint32_t t = tasks[next[s]];
      if (timeline.start_s[t] > now) {
        boundary = std::min(boundary, timeline.start_s[t]);
        continue;
      }
      boundary = std::min(boundary, timeline.end_s[t]);
      if (s == 0) {
        (plan.tasks[t].kind == TaskKind::kOptimizerStep ? optimizing : computing) = true;
      } else if (running_comm < 0) {
        running_comm = static_cast<int>(s);
      }
    }
    const double span = boundary - now;
    if (computing) out.compute_s += span;
    else if (optimizing) out.optimizer_s += span;
    else if (running_comm >= 0) out.exposed_s[static_cast<std::size_t>(running_comm)] += span;
    else out.bubble_s += span;
    now = boundary;
  }
  return out;
}

}  // namespace sextant::sim
