#include "sim/event/event_engine.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sim/plan/task_name.h"

namespace sextant::sim {

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

struct Event {
  double time_s;
  std::uint32_t task;
  std::uint32_t version;
};
// A min-heap on (time, task): ties end in task order, so runs are reproducible.
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time_s != b.time_s ? a.time_s > b.time_s : a.task > b.task;
  }
};

struct RankState {
  std::array<std::uint32_t, kStreamKinds> running;  // task on each stream, or kNone
  double activation_bytes = 0;
  bool dirty = false;  // its running set changed at this instant
};

class Engine {
 public:
  Engine(const Plan& plan, std::span<const TaskCost> costs, const EngineOptions& options)
      : plan_(plan), costs_(costs), options_(options) {
    const std::size_t n = plan.tasks.size();
    if (costs.size() != n) throw std::invalid_argument("play: one cost per task needed");
    timeline_.start_s.assign(n, 0.0);
    timeline_.end_s.assign(n, -1.0);
    timeline_.stages.assign(static_cast<std::size_t>(plan.num_stages()), {});
    ranks_.assign(static_cast<std::size_t>(plan.num_stages()), RankState{});
    for (RankState& r : ranks_) r.running.fill(kNone);
    remaining_s_.assign(n, 0.0);
    rate_.assign(n, 0.0);
    since_s_.assign(n, 0.0);
    version_.assign(n, 0);
    build_edges();
  }

  Timeline run() {
    const std::size_t n = plan_.tasks.size();
    heap_.reserve(n + 64);
    for (std::uint32_t t = 0; t < n; ++t) {
      if (pending_[t] == 0) start(t, 0.0);
    }
    refresh_dirty(0.0);
    std::size_t finished = 0;
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Event e = heap_.back();
      heap_.pop_back();
      if (e.version != version_[e.task]) continue;  // rescheduled since
      finish(e.task, e.time_s);
      ++finished;
      // Settle every task ending at this instant before recomputing rates.
      if (heap_.empty() || heap_.front().time_s != e.time_s) refresh_dirty(e.time_s);
    }
    if (finished != n) {
      for (std::uint32_t t = 0; t < n; ++t) {
        if (timeline_.end_s[t] < 0) {
          throw std::logic_error("plan deadlocks: " + std::to_string(n - finished) +
                                 " tasks never ran, first " + task_name(plan_, plan_.tasks[t]));
        }
      }
    }
    return std::move(timeline_);
  }

 private:
  // Successors through dependencies (CSR), and the next task on each task's stream.
  void build_edges() {
    const std::size_t n = plan_.tasks.size();
    pending_.assign(n, 0);
    next_on_stream_.assign(n, kNone);
    succ_begin_.assign(n + 1, 0);
    for (std::uint32_t t = 0; t < n; ++t) {
      pending_[t] = plan_.tasks[t].dep_count;
      for (std::uint32_t d : plan_.deps_of(t)) ++succ_begin_[d + 1];
    }
    for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] += succ_begin_[i];
    succ_.resize(plan_.deps.size());
    std::vector<std::uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
    for (std::uint32_t t = 0; t < n; ++t) {
      for (std::uint32_t d : plan_.deps_of(t)) succ_[fill[d]++] = t;
    }
    // Stream order: within a stage, tasks of one stream run in plan order.
    for (int s = 0; s < plan_.num_stages(); ++s) {
      std::array<std::uint32_t, kStreamKinds> last;
      last.fill(kNone);
      for (std::uint32_t t = plan_.stage_begin[static_cast<std::size_t>(s)];
           t < plan_.stage_begin[static_cast<std::size_t>(s) + 1]; ++t) {
        std::uint32_t& previous = last[static_cast<std::size_t>(plan_.tasks[t].stream)];
        if (previous != kNone) {
          next_on_stream_[previous] = t;
          ++pending_[t];
        }
        previous = t;
      }
    }
  }

  void start(std::uint32_t t, double now) {
    const Task& task = plan_.tasks[t];
    RankState& rank = ranks_[task.stage];
    rank.running[static_cast<std::size_t>(task.stream)] = t;
    mark_dirty(task.stage);
    timeline_.start_s[t] = now;
    remaining_s_[t] = costs_[t].duration_s;
    since_s_[t] = now;
    rate_[t] = 0;  // set by refresh
  }

  void finish(std::uint32_t t, double now) {
    const Task& task = plan_.tasks[t];
    RankState& rank = ranks_[task.stage];
    StageTimeline& stage = timeline_.stages[task.stage];
    rank.running[static_cast<std::size_t>(task.stream)] = kNone;
    mark_dirty(task.stage);
    timeline_.end_s[t] = now;
    stage.busy_s[static_cast<std::size_t>(task.stream)] += now - timeline_.start_s[t];
    stage.end_s = std::max(stage.end_s, now);
    timeline_.step_time_s = std::max(timeline_.step_time_s, now);
    if (costs_[t].activation_bytes != 0) {
      rank.activation_bytes += costs_[t].activation_bytes;
      stage.peak_activation_bytes = std::max(stage.peak_activation_bytes, rank.activation_bytes);
    }
    for (std::uint32_t i = succ_begin_[t]; i < succ_begin_[t + 1]; ++i) {
      const std::uint32_t s = succ_[i];
      if (--pending_[s] == 0) start(s, now);
    }
    const std::uint32_t next = next_on_stream_[t];
    if (next != kNone && --pending_[next] == 0) start(next, now);
  }

  void mark_dirty(std::uint16_t stage) {
    RankState& rank = ranks_[stage];
    if (!rank.dirty) {
      rank.dirty = true;
      dirty_.push_back(stage);
    }
  }

  // Rates of the running tasks of every rank whose running set changed.
  void refresh_dirty(double now) {
    for (std::uint16_t stage : dirty_) {
      RankState& rank = ranks_[stage];
      rank.dirty = false;
      int comm_running = 0;
      std::array<int, 3> on_link{};
      for (std::size_t s = 1; s < kStreamKinds; ++s) {
        const std::uint32_t t = rank.running[s];
        if (t == kNone) continue;
        ++comm_running;
        ++on_link[static_cast<std::size_t>(costs_[t].link)];
      }
      for (std::size_t s = 0; s < kStreamKinds; ++s) {
        const std::uint32_t t = rank.running[s];
        if (t == kNone) continue;
        double rate = 1.0;
        if (s == 0) {
          if (comm_running > 0) rate = 1.0 / (1.0 + options_.compute_slowdown_under_comm);
        } else if (options_.share_links && costs_[t].link != LinkKind::kNone) {
          rate = 1.0 / on_link[static_cast<std::size_t>(costs_[t].link)];
        }
        if (rate == rate_[t]) continue;
        // Work done so far at the old rate, the rest at the new one.
        remaining_s_[t] = std::max(0.0, remaining_s_[t] - (now - since_s_[t]) * rate_[t]);
        since_s_[t] = now;
        rate_[t] = rate;
        heap_.push_back({now + remaining_s_[t] / rate, t, ++version_[t]});
        std::push_heap(heap_.begin(), heap_.end(), Later{});
      }
    }
    dirty_.clear();
  }

  const Plan& plan_;
  std::span<const TaskCost> costs_;
  const EngineOptions& options_;
  Timeline timeline_;
  std::vector<RankState> ranks_;
  std::vector<std::uint32_t> pending_;  // unfinished dependencies (and stream predecessor)
  std::vector<std::uint32_t> next_on_stream_;
  std::vector<std::uint32_t> succ_begin_, succ_;
  std::vector<double> remaining_s_, rate_, since_s_;
  std::vector<std::uint32_t> version_;
  std::vector<Event> heap_;
  std::vector<std::uint16_t> dirty_;  // ranks to refresh
};

}  // namespace

Timeline play(const Plan& plan, std::span<const TaskCost> costs, const EngineOptions& options) {
  return Engine(plan, costs, options).run();
}

}  // namespace sextant::sim
