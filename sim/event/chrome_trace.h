// A played Plan as a Chrome trace (the JSON "Trace Event Format" that
// chrome://tracing and Perfetto open): one process per pipeline stage, one
// thread per stream (compute, TP comm, CP comm, EP comm, PP sends, DP comm),
// one complete event ("ph": "X") per task named as the engine names it, and a
// counter ("ph": "C") of the stage's activation memory. Tasks on the critical
// path carry "critical_path": true in their args.
// Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string_view>

#include "sim/event/event_engine.h"
#include "sim/event/task_costs.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

/// Writes the trace to `out`; `title` (a model and layout, say) goes into its metadata.
void write_chrome_trace(std::ostream& out, const Plan& plan, const Timeline& timeline,
                        std::span<const TaskCost> costs,
                        std::span<const std::uint32_t> critical_path, std::string_view title);

}  // namespace sextant::sim
