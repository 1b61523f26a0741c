// Rendering of simulation results: JSON (the DESIGN.md contract) and CSV for
// spreadsheets here, the table for people in simulation_table.cc, the event
// engine's own results in event_output.cc.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/analytic/simulation_result.h"
#include "sim/core/model_config.h"
#include "sim/core/cost_profile.h"
#include "sim/event/event_simulation.h"
#include "sim/flops/model_flops.h"

namespace sextant::tools {

/// Which attention FLOPs MFU counts (sim/flops/model_flops.h): "megatron" (every
/// query against all s keys, Narayanan et al. 2021 eq. 3, the published figures'
/// convention) or "causal" (only the pairs a causal mask keeps, about half at long s).
enum class MfuConvention { kMegatron, kCausal };
const char* to_string(MfuConvention c);

struct SimulationContext {
  std::string model;
  std::string cluster;
  std::string gpu;
  long gpus = 0;
  double gpu_memory_bytes = 0;
  std::string engine = "analytic";
  /// PipelineSplit::describe() of the layout shown, when its stages are uneven.
  std::string pipeline_split;
  MfuConvention mfu_convention = MfuConvention::kMegatron;
  // Causal over Megatron model FLOPs of this model: the same for every layout
  // and batch (both scale with gbs); 1 when unknown. sim::causal_flops_fraction().
  double causal_flops_fraction = 1.0;
  /// The cost profile used: its name and whose kernels it describes, and,
  /// when it carries a fit, the interval it puts around step times.
  const sim::CostProfile* profile = nullptr;
};

/// MFU in the context's convention.
double reported_mfu(const SimulationContext& context, const sim::SimulationResult& r);

/// One line per abbreviation the search table uses (rc=, ovl=, ...).
std::string search_table_legend(MfuConvention convention);

/// A CSV field per RFC 4180: quoted (inner quotes doubled) when it holds a comma,
/// a quote, a CR or a LF; as is otherwise.
std::string csv_field(const std::string& text);

/// {"name": ..., "software": ...} of the context's profile.
nlohmann::json profile_json(const sim::CostProfile& profile);
/// "h100-sxm-80gb (megatron-published)"
std::string profile_label(const sim::CostProfile& profile);

nlohmann::json layout_json(const sim::ParallelLayout& layout);
/// {"cuda_context": bytes, "nccl_process": ..., "nccl_communicators": ...,
/// "nccl_ring_buffers": ..., "nccl_p2p_buffers": ...} (sim/memory/runtime_memory.h).
nlohmann::json runtime_parts_json(const sim::RuntimeMemory& runtime);
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
