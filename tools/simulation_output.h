// Rendering of simulation results: JSON (the DESIGN.md contract), a table for
// people, and CSV for spreadsheets.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/analytic/simulation_result.h"

namespace sextant::tools {

struct SimulationContext {
  std::string model;
  std::string cluster;
  std::string gpu;
  long gpus = 0;
  double gpu_memory_bytes = 0;
  std::string engine = "analytic";
};

nlohmann::json layout_json(const sim::ParallelLayout& layout);
nlohmann::json simulation_json(const SimulationContext& context, const sim::SimulationResult& r);
std::string simulation_table(const SimulationContext& context, const sim::SimulationResult& r);
std::string simulation_csv_header();
std::string simulation_csv_row(const SimulationContext& context, const sim::SimulationResult& r);

/// "1.234 s", "12.3 ms", "45 µs".
std::string format_seconds(double seconds);
/// "74.2 GiB"
std::string format_gib(double bytes);

}  // namespace sextant::tools
