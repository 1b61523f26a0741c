#include "sim/event/stage_breakdown.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace sextant::sim {

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

class GapAttribution {
 public:
  GapAttribution(const Plan& plan, const Timeline& timeline) : plan_(plan), tl_(timeline) {
    // The task before each task on its stream (a predecessor like its dependencies).
    previous_.assign(plan.tasks.size(), kNone);
    for (int s = 0; s < plan.num_stages(); ++s) {
      std::array<std::uint32_t, kStreamKinds> last;
      last.fill(kNone);
      for (std::uint32_t t = plan.stage_begin[static_cast<std::size_t>(s)];
           t < plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++t) {
        std::uint32_t& p = last[static_cast<std::size_t>(plan.tasks[t].stream)];
        previous_[t] = p;
        p = t;
      }
    }
  }

  // Splits [gap_start, start of `waiting`) along the chain of binding predecessors.
  void attribute(std::uint32_t waiting, double gap_start, StageBreakdown& out) const {
    const std::uint16_t stage = plan_.tasks[waiting].stage;
    double until = tl_.start_s[waiting];
    std::uint32_t t = binding(waiting);
    while (t != kNone && until > gap_start) {
      const double from = std::max(tl_.start_s[t], gap_start);
      const double span = std::max(0.0, until - from);
      const Task& task = plan_.tasks[t];
      const bool send = task.kind == TaskKind::kPipelineSend;
      if (task.stream != StreamKind::kCompute && (task.stage == stage || send)) {
        out.exposed_s[static_cast<std::size_t>(task.stream)] += span;
      } else {
        out.bubble_s += span;
      }
      until = from;
      t = binding(t);
    }
    if (until > gap_start) out.bubble_s += until - gap_start;
  }

 private:
  // The predecessor (dependency or stream predecessor) that ended last.
  std::uint32_t binding(std::uint32_t t) const {
    std::uint32_t best = previous_[t];
    for (std::uint32_t d : plan_.deps_of(t)) {
      if (best == kNone || tl_.end_s[d] > tl_.end_s[best]) best = d;
    }
    return best;
  }

  const Plan& plan_;
  const Timeline& tl_;
  std::vector<std::uint32_t> previous_;
};

}  // namespace

double StageBreakdown::exposed_communication_s() const {
  return std::accumulate(exposed_s.begin(), exposed_s.end(), 0.0);
}

StageBreakdown stage_breakdown(const Plan& plan, const Timeline& timeline, int stage) {
  const GapAttribution gaps(plan, timeline);
  StageBreakdown out;
  const std::uint32_t begin = plan.stage_begin[static_cast<std::size_t>(stage)];
  const std::uint32_t end = plan.stage_begin[static_cast<std::size_t>(stage) + 1];
  double computed_until = 0;
  for (std::uint32_t t = begin; t < end; ++t) {
    const Task& task = plan.tasks[t];
    if (task.stream != StreamKind::kCompute) continue;
    gaps.attribute(t, computed_until, out);
    const double busy = timeline.end_s[t] - timeline.start_s[t];
    (task.kind == TaskKind::kOptimizerStep ? out.optimizer_s : out.compute_s) += busy;
    computed_until = timeline.end_s[t];
  }
  // After the last compute: the stage's own communication still running
  // (gathers after the optimizer step, say) is exposed; then it waits.
  double now = computed_until;
  for (std::uint32_t t = begin; t < end; ++t) {
    const Task& task = plan.tasks[t];
    if (task.stream == StreamKind::kCompute || timeline.end_s[t] <= now) continue;
    out.exposed_s[static_cast<std::size_t>(task.stream)] += timeline.end_s[t] - std::max(now, timeline.start_s[t]);
    out.bubble_s += std::max(0.0, timeline.start_s[t] - now);
    now = timeline.end_s[t];
  }
  out.bubble_s += std::max(0.0, timeline.step_time_s - now);
  return out;
}

}  // namespace sextant::sim
