// simulation_output.h's table for people: FLOPs, memory per GPU, the step's
// time by part, throughput and what limits it.
#include <cstdio>
#include <string>

#include "sim/compute/prediction_interval.h"
#include "sim/core/text_format.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

std::string simulation_table(const SimulationContext& c, const sim::SimulationResult& r) {
  const sim::MemoryBreakdown& m = r.memory;
  const auto line = [](const std::string& label, const std::string& value) {
    char buffer[160];
    std::snprintf(buffer, sizeof buffer, "  %-24s %s\n", label.c_str(), value.c_str());
    return std::string(buffer);
  };
  const auto share = [&](double part) { return " (" + sim::format_percent(part / r.step_time_s) + ")"; };
  std::string out;
  out += "sextant simulate: " + c.model + " on " + std::to_string(c.gpus) + " x " + c.gpu +
         " (" + c.cluster + "), " + c.engine + " model\n";
  if (c.profile) out += "profile: " + profile_label(*c.profile) + "\n";
  out += "layout: " + r.layout.to_spec() + "\n";
  if (!c.pipeline_split.empty()) out += "pipeline split (per rank, chunks /): " + c.pipeline_split + "\n";
  out += "\n";
  out += "FLOPs per iteration\n";
  out += line("model", sim::format_number("%.4g", r.model_flops_per_step));
  out += line("hardware (+recompute)", sim::format_number("%.4g", r.hardware_flops_per_step));
  out += "\nMemory per GPU (the pipeline stage that needs most)\n";
  out += line("parameters", format_gib(m.parameters));
  out += line("gradients", format_gib(m.gradients));
  out += line("optimizer states", format_gib(m.optimizer_states));
  out += line("activations", format_gib(m.activations));
  out += line("other", format_gib(m.other));
  out += line("runtime", format_gib(m.runtime.total()) + " (CUDA context " + format_gib(m.runtime.cuda_context) +
                             ", NCCL " + format_gib(m.runtime.nccl()) + ")");
  out += line("total", format_gib(m.total()) + " of " + format_gib(c.gpu_memory_bytes) +
                           (r.fits_memory ? " (fits)" : " (DOES NOT FIT)"));
  out += "\nStep time\n";
  out += line("compute", format_seconds(r.time.compute_s) + share(r.time.compute_s));
  out += line("exposed communication",
              format_seconds(r.time.exposed_communication_s) +
                  share(r.time.exposed_communication_s));
  out += line("  tp / cp / ep", format_seconds(r.exposed_tp_s) + " / " +
                                    format_seconds(r.exposed_cp_s) + " / " +
                                    format_seconds(r.exposed_ep_s));
  out += line("  pp / dp", format_seconds(r.exposed_pp_s) + " / " + format_seconds(r.exposed_dp_s));
  out += line("pipeline bubble",
              format_seconds(r.time.pipeline_bubble_s) + share(r.time.pipeline_bubble_s));
  out += line("optimizer", format_seconds(r.time.optimizer_s) + share(r.time.optimizer_s));
  std::string total = format_seconds(r.step_time_s);
  if (c.profile) {
    if (const auto interval = sim::step_time_interval_s(r.step_time_s, *c.profile)) {
      const double half = 0.5 * (interval->second - interval->first);
      total += " ± " + format_seconds(half) + " (" +
               sim::format_percent(sim::kPredictionIntervalCoverage) + " interval " +
               format_seconds(interval->first) + " - " + format_seconds(interval->second) + ")";
    }
  }
  out += line("total", total);
  out += "\nThroughput\n";
  out += line("tokens/s", sim::format_number("%.0f", r.tokens_per_s));
  out += line("tokens/s per GPU", sim::format_number("%.1f", r.tokens_per_s_per_gpu));
  const bool causal = c.mfu_convention == MfuConvention::kCausal;
  out += line("MFU", sim::format_percent(reported_mfu(c, r)) +
                         (causal ? " (causal attention; Megatron's convention " +
                                       sim::format_percent(r.mfu) + ")"
                                 : " (Megatron convention, full s x s attention; causal " +
                                       sim::format_percent(r.mfu * c.causal_flops_fraction) + ")"));
  out += line("HFU", sim::format_percent(r.hfu));
  if (r.limiter == sim::Limiter::kCompute) {
    out += line("largest non-compute cost",
                "none (compute is " + sim::format_percent(r.time.compute_s / r.step_time_s) +
                    " of the step)");
  } else {
    const double part = [&] {
      switch (r.limiter) {
        case sim::Limiter::kTensorParallelComm: return r.exposed_tp_s;
        case sim::Limiter::kContextParallelComm: return r.exposed_cp_s;
        case sim::Limiter::kExpertParallelComm: return r.exposed_ep_s;
        case sim::Limiter::kPipelineComm: return r.exposed_pp_s;
        case sim::Limiter::kDataParallelComm: return r.exposed_dp_s;
        case sim::Limiter::kPipelineBubble: return r.time.pipeline_bubble_s;
        case sim::Limiter::kOptimizer: return r.time.optimizer_s;
        case sim::Limiter::kCompute: break;
      }
      return 0.0;
    }();
    out += line("largest non-compute cost", std::string(sim::to_string(r.limiter)) + " (" +
                                                sim::format_percent(part / r.step_time_s) + " of the step)");
  }
  return out;
}

}  // namespace sextant::tools
