#include "sim/event/chrome_trace.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/event/json_text.h"
#include "sim/plan/task_name.h"

namespace sextant::sim {

namespace {

// Trace timestamps are microseconds.
double to_us(double seconds) { return seconds * 1e6; }

// "stage 2 (layers 24-35)" or, interleaved, "stage 2 (layers 8-11, 40-43)".
std::string stage_title(const Plan& plan, int stage) {
  std::string out = "stage " + std::to_string(stage) + " (layers ";
  for (int c = 0; c < plan.shape.vpp; ++c) {
    const int first = global_layer(plan.shape, stage, c, 0);
    const int count = layers_in_chunk(plan.shape, stage, c);
    if (c > 0) out += ", ";
    out += count > 0 ? std::to_string(first) + "-" + std::to_string(first + count - 1) : "none";
  }
  return out + ")";
}

// Events are separated by commas; JSON allows none after the last.
class EventList {
 public:
  explicit EventList(std::string& out) : out_(out) {}
  std::string& next() {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    return out_;
  }

 private:
  std::string& out_;
  bool first_ = true;
};

void metadata(EventList& events, int pid, int tid, std::string_view name, std::string_view key,
              std::string_view text, long number) {
  std::string& out = events.next();
  out += "{\"ph\":\"M\",\"pid\":" + std::to_string(pid);
  if (tid >= 0) out += ",\"tid\":" + std::to_string(tid);
  out += ",\"name\":";
  append_json_string(out, name);
  out += ",\"args\":{";
  append_json_string(out, key);
  out += ':';
  if (key.ends_with("sort_index")) {
    out += std::to_string(number);
  } else {
    append_json_string(out, text);
  }
  out += "}}";
}

}  // namespace

void write_chrome_trace(std::ostream& os, const Plan& plan, const Timeline& timeline,
                        std::span<const TaskCost> costs,
                        std::span<const std::uint32_t> critical_path, std::string_view title) {
  std::vector<bool> critical(plan.tasks.size(), false);
  for (std::uint32_t t : critical_path) critical[t] = true;

  std::string out;
  out.reserve(1 << 20);
  out += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":";
  append_json_string(out, title);
  out += ",\"schedule\":";
  append_json_string(out, to_string(plan.shape.schedule));
  out += ",\"step_time_s\":";
  append_json_number(out, timeline.step_time_s);
  out += "},\n\"traceEvents\":[";
  EventList events(out);

  for (int s = 0; s < plan.num_stages(); ++s) {
    metadata(events, s, -1, "process_name", "name", stage_title(plan, s), 0);
    metadata(events, s, -1, "process_sort_index", "sort_index", "", s);
    std::array<bool, kStreamKinds> used{};
    for (std::uint32_t t = plan.stage_begin[static_cast<std::size_t>(s)];
         t < plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++t) {
      used[static_cast<std::size_t>(plan.tasks[t].stream)] = true;
    }
    for (int k = 0; k < kStreamKinds; ++k) {
      if (!used[static_cast<std::size_t>(k)]) continue;
      metadata(events, s, k, "thread_name", "name", stream_title(static_cast<StreamKind>(k)), 0);
      metadata(events, s, k, "thread_sort_index", "sort_index", "", k);
    }
  }
  std::string name;
  for (std::uint32_t t = 0; t < plan.tasks.size(); ++t) {
    const Task& task = plan.tasks[t];
    name.clear();
    append_task_name(plan, task, name);
    events.next() += "{\"ph\":\"X\",\"pid\":";
    out += std::to_string(task.stage);
    out += ",\"tid\":";
    out += std::to_string(static_cast<int>(task.stream));
    out += ",\"ts\":";
    append_json_number(out, to_us(timeline.start_s[t]));
    out += ",\"dur\":";
    append_json_number(out, to_us(timeline.end_s[t] - timeline.start_s[t]));
    out += ",\"name\":";
    append_json_string(out, name);
    out += ",\"cat\":";
    append_json_string(out, to_string(task.stream));
    if (critical[t]) out += ",\"args\":{\"critical_path\":true}";
    out += "}";
    if (out.size() > (1 << 20)) {
      os << out;
      out.clear();
    }
  }

  // Activation memory of each stage, stepping at the ends of the tasks that change it.
  for (int s = 0; s < plan.num_stages(); ++s) {
    std::vector<std::pair<double, double>> changes;  // (time, bytes added)
    for (std::uint32_t t = plan.stage_begin[static_cast<std::size_t>(s)];
         t < plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++t) {
      if (costs[t].activation_bytes != 0) changes.emplace_back(timeline.end_s[t], costs[t].activation_bytes);
    }
    std::stable_sort(changes.begin(), changes.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    double bytes = 0;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      bytes += changes[i].second;
      if (i + 1 < changes.size() && changes[i + 1].first == changes[i].first) continue;
      events.next() += "{\"ph\":\"C\",\"pid\":" + std::to_string(s) +
                       ",\"name\":\"activation memory\",\"ts\":";
      append_json_number(out, to_us(changes[i].first));
      out += ",\"args\":{\"GiB\":";
      append_json_number(out, bytes / (1024.0 * 1024.0 * 1024.0));
      out += "}}";
    }
    if (out.size() > (1 << 20)) {
      os << out;
      out.clear();
    }
  }
  out += "\n]}\n";
  os << out;
}

}  // namespace sextant::sim
