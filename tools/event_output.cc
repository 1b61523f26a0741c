// simulation_output.h's rendering of what only the event engine knows: each
// stage's streams, breakdown and activation peak, and where the critical
// path's time goes.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "sim/core/text_format.h"
#include "sim/event/critical_path.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

namespace {
sim::StreamKind stream(int k) { return static_cast<sim::StreamKind>(k); }
}  // namespace

nlohmann::json event_json(const sim::EventSimulation& e, const std::string& trace_path) {
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < e.plan.num_stages(); ++s) {
    const sim::StageTimeline& t = e.timeline.stages[static_cast<std::size_t>(s)];
    const sim::StageBreakdown b = sim::stage_breakdown(e.plan, e.timeline, s);
    nlohmann::json busy = nlohmann::json::object();
    nlohmann::json exposed = nlohmann::json::object();
    for (int k = 0; k < sim::kStreamKinds; ++k) {
      busy[std::string(sim::to_string(stream(k)))] = t.busy_s[static_cast<std::size_t>(k)];
      if (k > 0) exposed[std::string(sim::to_string(stream(k)))] = b.exposed_s[static_cast<std::size_t>(k)];
    }
    stages.push_back({{"stage", s},
                      {"stream_busy_s", busy},
                      {"compute_s", b.compute_s},
                      {"exposed_communication_s", exposed},
                      {"pipeline_bubble_s", b.bubble_s},
                      {"optimizer_s", b.optimizer_s},
                      {"end_s", t.end_s},
                      {"peak_activation_bytes", static_cast<std::int64_t>(std::llround(t.peak_activation_bytes))}});
  }
  const sim::CriticalPathTime share = sim::critical_path_time(e.plan, e.timeline, e.critical_path);
  nlohmann::json by_stream = nlohmann::json::object();
  for (int k = 0; k < sim::kStreamKinds; ++k) {
    by_stream[std::string(sim::to_string(stream(k)))] = share.stream_s[static_cast<std::size_t>(k)];
  }
  by_stream["optimizer"] = share.optimizer_s;
  nlohmann::json out = {{"schedule", sim::to_string(e.plan.shape.schedule)},
                        {"microbatches", e.plan.shape.microbatches},
                        {"tasks", e.plan.tasks.size()},
                        {"breakdown_stage", e.reported_stage},
                        {"stages", stages},
                        {"critical_path", {{"tasks", e.critical_path.size()}, {"by_stream_s", by_stream}}}};
  if (!trace_path.empty()) out["trace"] = trace_path;
  return out;
}

std::string event_table(const sim::EventSimulation& e, const std::string& trace_path) {
  std::string out = "\nEvent simulation: " + std::string(sim::to_string(e.plan.shape.schedule)) +
                    " schedule, " + std::to_string(e.plan.shape.microbatches) +
                    " micro-batches, " + std::to_string(e.plan.tasks.size()) +
                    " tasks; the step-time breakdown above is stage " +
                    std::to_string(e.reported_stage) + "'s (most compute)\n";
  char row[256];
  std::snprintf(row, sizeof row, "  %-6s %10s %10s %10s %10s %10s %10s %10s\n", "stage", "compute",
                "TP", "CP", "EP", "PP", "DP", "peak act.");
  out += row;
  out += "  (busy time of each stream; peak activation memory)\n";
  for (int s = 0; s < e.plan.num_stages(); ++s) {
    const sim::StageTimeline& t = e.timeline.stages[static_cast<std::size_t>(s)];
    auto busy = [&](sim::StreamKind k) { return t.busy_s[static_cast<std::size_t>(k)]; };
    std::snprintf(row, sizeof row, "  %-6d %10s %10s %10s %10s %10s %10s %10s\n", s,
                  format_seconds(busy(sim::StreamKind::kCompute)).c_str(),
                  format_seconds(busy(sim::StreamKind::kTensorParallel)).c_str(),
                  format_seconds(busy(sim::StreamKind::kContextParallel)).c_str(),
                  format_seconds(busy(sim::StreamKind::kExpertParallel)).c_str(),
                  format_seconds(busy(sim::StreamKind::kPipelineForward) +
                                 busy(sim::StreamKind::kPipelineBackward)).c_str(),
                  format_seconds(busy(sim::StreamKind::kDataParallel) +
                                 busy(sim::StreamKind::kDataParallelGather)).c_str(),
                  format_gib(t.peak_activation_bytes).c_str());
    out += row;
  }
  if (!e.critical_path.empty()) {
    const sim::CriticalPathTime share = sim::critical_path_time(e.plan, e.timeline, e.critical_path);
    out += "  critical path: " + std::to_string(e.critical_path.size()) + " tasks;";
    const double total = e.timeline.step_time_s;
    for (int k = 0; k < sim::kStreamKinds; ++k) {
      const double part = share.stream_s[static_cast<std::size_t>(k)];
      if (part <= 0) continue;
      out += " " + std::string(sim::stream_title(stream(k))) + " " + sim::format_percent(part / total) + ",";
    }
    out += " optimizer " + sim::format_percent(share.optimizer_s / total) + "\n";
  }
  if (!trace_path.empty()) out += "  trace: " + trace_path + " (open in https://ui.perfetto.dev or chrome://tracing)\n";
  return out;
}

}  // namespace sextant::tools
