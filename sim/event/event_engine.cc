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
  int comm_running = 0;                             // communication tasks running
  std::array<int, 3> on_link{};                     // of those, on each LinkKind
  double activation_bytes = 0;
};

// Where a running task stands: work left at `since_s`, done at `rate` since.
struct Progress {
  double remaining_s = 0;
  double rate = 0;
  double since_s = 0;
  std::uint32_t version = 0;  // bumped when its end is rescheduled
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
    progress_.assign(n, Progress{});
    slowed_rate_ = 1.0 / (1.0 + options.compute_slowdown_under_comm);
    build_edges();
  }

  Timeline run() {
    const auto n = static_cast<std::uint32_t>(plan_.tasks.size());
    heap_.reserve(256);
    for (std::uint32_t t = 0; t < n; ++t) {
      if (pending_[t] == 0) start(t, 0.0);
    }
    std::uint32_t finished = 0;
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Event e = heap_.back();
      heap_.pop_back();
      if (e.version != progress_[e.task].version) continue;  // rescheduled since
      finish(e.task, e.time_s);
      ++finished;
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
    pending_.resize(n);
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

  double compute_rate(const RankState& rank) const {
    return rank.comm_running > 0 ? slowed_rate_ : 1.0;
  }
  double link_rate(const RankState& rank, LinkKind link) const {
    if (!options_.share_links || link == LinkKind::kNone) return 1.0;
    return 1.0 / rank.on_link[static_cast<std::size_t>(link)];
  }

  // (Re)schedules the end of running task `t` for a new rate from `now` on.
  void set_rate(std::uint32_t t, double rate, double now) {
    Progress& p = progress_[t];
    if (rate == p.rate) return;
    // Work done so far at the old rate, the rest at the new one.
    p.remaining_s = std::max(0.0, p.remaining_s - (now - p.since_s) * p.rate);
    p.since_s = now;
    p.rate = rate;
    heap_.push_back({now + p.remaining_s / rate, t, ++p.version});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // After a communication task on `link` started or ended on `rank`: the
  // others on that link get their new share, and compute slows down or
  // speeds up when the first communication starts or the last ends.
  void communication_changed(RankState& rank, LinkKind link, bool first_or_last, double now) {
    if (options_.share_links && link != LinkKind::kNone) {
      const double share = link_rate(rank, link);
      for (std::size_t s = 1; s < kStreamKinds; ++s) {
        const std::uint32_t other = rank.running[s];
        if (other != kNone && costs_[other].link == link) set_rate(other, share, now);
      }
    }
    if (first_or_last && rank.running[0] != kNone) {
      set_rate(rank.running[0], compute_rate(rank), now);
    }
  }

  void start(std::uint32_t t, double now) {
    const Task& task = plan_.tasks[t];
    RankState& rank = ranks_[task.stage];
    timeline_.start_s[t] = now;
    Progress& p = progress_[t];
    p.remaining_s = costs_[t].duration_s;
    p.since_s = now;
    p.rate = 0;
    const auto stream = static_cast<std::size_t>(task.stream);
    rank.running[stream] = t;
    if (stream == 0) {
      set_rate(t, compute_rate(rank), now);
      return;
    }
    const LinkKind link = costs_[t].link;
    ++rank.comm_running;
    ++rank.on_link[static_cast<std::size_t>(link)];
    set_rate(t, link_rate(rank, link), now);
    const bool shared = rank.on_link[static_cast<std::size_t>(link)] > 1;
    const bool first = rank.comm_running == 1 && options_.compute_slowdown_under_comm != 0;
    if (shared || first) communication_changed(rank, link, first, now);
  }

  void finish(std::uint32_t t, double now) {
    const Task& task = plan_.tasks[t];
    RankState& rank = ranks_[task.stage];
    StageTimeline& stage = timeline_.stages[task.stage];
    const auto stream = static_cast<std::size_t>(task.stream);
    rank.running[stream] = kNone;
    timeline_.end_s[t] = now;
    stage.busy_s[stream] += now - timeline_.start_s[t];
    stage.end_s = std::max(stage.end_s, now);
    timeline_.step_time_s = std::max(timeline_.step_time_s, now);
    if (costs_[t].activation_bytes != 0) {
      rank.activation_bytes += costs_[t].activation_bytes;
      stage.peak_activation_bytes = std::max(stage.peak_activation_bytes, rank.activation_bytes);
    }
    if (stream != 0) {
      const LinkKind link = costs_[t].link;
      --rank.comm_running;
      --rank.on_link[static_cast<std::size_t>(link)];
      const bool shared = rank.on_link[static_cast<std::size_t>(link)] > 0;
      const bool last = rank.comm_running == 0 && options_.compute_slowdown_under_comm != 0;
      if (shared || last) communication_changed(rank, link, last, now);
    }
    for (std::uint32_t i = succ_begin_[t]; i < succ_begin_[t + 1]; ++i) {
      const std::uint32_t s = succ_[i];
      if (--pending_[s] == 0) start(s, now);
    }
    const std::uint32_t next = next_on_stream_[t];
    if (next != kNone && --pending_[next] == 0) start(next, now);
  }

  const Plan& plan_;
  std::span<const TaskCost> costs_;
  const EngineOptions& options_;
  double slowed_rate_ = 1.0;
  Timeline timeline_;
  std::vector<RankState> ranks_;
  std::vector<std::uint32_t> pending_;  // unfinished dependencies (and stream predecessor)
  std::vector<std::uint32_t> next_on_stream_;
  std::vector<std::uint32_t> succ_begin_, succ_;
  std::vector<Progress> progress_;
  std::vector<Event> heap_;  // ends of running tasks; a few per rank
};

}  // namespace

Timeline play(const Plan& plan, std::span<const TaskCost> costs, const EngineOptions& options) {
  return Engine(plan, costs, options).run();
}

}  // namespace sextant::sim
