// Rendering of simulation results: JSON (the DESIGN.md contract), a table for
// people, and CSV for spreadsheets.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/analytic/simulation_result.h"
#include "sim/core/cost_profile.h"
#include "sim/event/event_simulation.h"

namespace sextant::tools {

struct SimulationContext {
  std::string model;
  std::string cluster;
  std::string gpu;
  long gpus = 0;
  double gpu_memory_bytes = 0;
  std::string engine = "analytic";
  /// The cost profile used: its name and whose kernels it describes, and,
  /// when it carries a fit, the interval it puts around step times.
  const sim::CostProfile* profile = nullptr;
};

/// {"name": ..., "software": ...} of the context's profile.
nlohmann::json profile_json(const sim::CostProfile& profile);
/// "h100-sxm-80gb (megatron-published)"
std::string profile_label(const sim::CostProfile& profile);

nlohmann::json layout_json(const sim::ParallelLayout& layout);
nlohmann::json simulation_json(const SimulationContext& context, const sim::SimulationResult& r);
std::string simulation_table(const SimulationContext& context, const sim::SimulationResult& r);
std::string simulation_csv_header();
std::string simulation_csv_row(const SimulationContext& context, const sim::SimulationResult& r);

/// What only the event engine knows (`simulate --engine event`): the schedule,
/// each stage's stream busy times, breakdown and activation peak, and the
/// critical path by stream. Goes under the key "event" of simulation_json;
/// `trace_path` is named there when a trace was written.
nlohmann::json event_json(const sim::EventSimulation& e, const std::string& trace_path);
std::string event_table(const sim::EventSimulation& e, const std::string& trace_path);

/// "1.234 s", "12.3 ms", "45 µs".
std::string format_seconds(double seconds);
/// "74.2 GiB"
std::string format_gib(double bytes);

}  // namespace sextant::tools
