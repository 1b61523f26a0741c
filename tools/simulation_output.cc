#include "tools/simulation_output.h"

#include <array>
#include <cmath>
#include <cstdio>

#include "sim/compute/prediction_interval.h"
#include "sim/core/text_format.h"
#include "sim/flops/model_flops.h"

namespace sextant::tools {

namespace {
std::string printf_string(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}
std::string percent(double fraction) { return sim::format_percent(fraction); }
std::int64_t whole_bytes(double bytes) { return static_cast<std::int64_t>(std::llround(bytes)); }
}  // namespace

const char* to_string(MfuConvention c) {
  return c == MfuConvention::kCausal ? "causal" : "megatron";
}

double causal_flops_fraction(const sim::ModelConfig& model) {
  sim::ParallelLayout one;  // one sequence; the fraction does not depend on the layout
  one.gbs = 1;
  const double megatron = sim::step_flops(model, one, sim::AttentionCounting::kMegatron).model_flops;
  const double causal = sim::step_flops(model, one, sim::AttentionCounting::kCausal).model_flops;
  return megatron > 0 ? causal / megatron : 1.0;
}

double reported_mfu(const SimulationContext& c, const sim::SimulationResult& r) {
  return c.mfu_convention == MfuConvention::kCausal ? r.mfu * c.causal_flops_fraction : r.mfu;
}

std::string search_table_legend(MfuConvention convention) {
  return std::string(
             "Legend: vpp virtual pipeline stages per GPU; mbs micro-batch; sp sequence "
             "parallelism;\n"
             "  rc= activation recomputation (none|selective|full); zero= ZeRO stage (1: "
             "distributed optimizer);\n"
             "  ovl= overlaps on: g grad reduce-scatter, p param all-gather, t TP communication;\n"
             "  headroom: memory left free of the GPU's; MFU counts attention ") +
         (convention == MfuConvention::kCausal
              ? "causally (only the scores a causal mask keeps; --mfu causal).\n"
              : "as Megatron does (every query against all s keys; --mfu causal counts the "
                "causal half).\n");
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string format_seconds(double s) {
  if (s >= 1.0) return printf_string("%.3f s", s);
  if (s >= 1e-3) return printf_string("%.2f ms", s * 1e3);
  return printf_string("%.1f us", s * 1e6);
}

std::string format_gib(double bytes) { return sim::format_gib(bytes, 2); }

nlohmann::json layout_json(const sim::ParallelLayout& l) {
  // The split knobs: null (or false) when not set, Megatron's even split.
  const auto layers_or_null = [](int layers) {
    return layers > 0 ? nlohmann::json(layers) : nlohmann::json(nullptr);
  };
  return {{"tp", l.tp},
          {"pp", l.pp},
          {"vpp", l.vpp},
          {"dp", l.dp},
          {"cp", l.cp},
          {"ep", l.ep},
          {"etp", l.etp},
          {"mbs", l.mbs},
          {"gbs", l.gbs},
          {"sp", l.sp},
          {"recompute", sim::to_string(l.recompute)},
          {"dist_opt", l.dist_opt()},
          {"zero", l.zero},
          {"schedule", sim::to_string(l.schedule)},
          {"precision", sim::to_string(l.precision)},
          {"attention", sim::to_string(l.attention)},
          {"overlap_grad_reduce", l.overlap_grad_reduce},
          {"overlap_param_gather", l.overlap_param_gather},
          {"tp_comm_overlap", l.tp_comm_overlap},
          {"first_stage_layers", layers_or_null(l.first_stage_layers)},
          {"last_stage_layers", layers_or_null(l.last_stage_layers)},
          {"embedding_in_split", l.embedding_in_split},
          {"loss_in_split", l.loss_in_split},
          {"pp_layout", l.pp_layout.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.pp_layout)},
          {"fsdp", sim::to_string(l.fsdp)},
          {"grad_reduce_in_fp32", l.grad_reduce_in_fp32},
          {"moe_a2a_overlap", l.moe_a2a_overlap},
          {"moe_shared_expert_overlap", l.moe_shared_expert_overlap}};
}

// The DESIGN.md fields; simulation_json adds the profile's.
nlohmann::json simulation_json_fields(const SimulationContext& c, const sim::SimulationResult& r);

nlohmann::json profile_json(const sim::CostProfile& profile) {
  nlohmann::json j = {{"name", profile.name}, {"software", sim::to_string(profile.software)}};
  j["framework"] = profile.framework.empty() ? nlohmann::json(nullptr)
                                             : nlohmann::json(profile.framework);
  return j;
}

std::string profile_label(const sim::CostProfile& profile) {
  std::string label = profile.name + " (" + std::string(sim::to_string(profile.software));
  if (!profile.framework.empty()) label += ", framework " + profile.framework;
  return label + ")";
}

nlohmann::json simulation_json(const SimulationContext& c, const sim::SimulationResult& r) {
  nlohmann::json j = simulation_json_fields(c, r);
  if (c.profile) {
    j["profile"] = profile_json(*c.profile);
    if (const auto interval = sim::step_time_interval_s(r.step_time_s, *c.profile)) {
      j["step_time_interval_s"] = {interval->first, interval->second};
      j["step_time_interval_coverage"] = sim::kPredictionIntervalCoverage;
    }
  }
  return j;
}

nlohmann::json simulation_json_fields(const SimulationContext& c, const sim::SimulationResult& r) {
  const sim::MemoryBreakdown& m = r.memory;
  return {
      {"model", c.model},
      {"cluster", c.cluster},
      {"gpus", c.gpus},
      {"engine", c.engine},
      {"layout", layout_json(r.layout)},
      {"step_time_s", r.step_time_s},
      {"tokens_per_s", r.tokens_per_s},
      {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
      {"model_flops_per_step", r.model_flops_per_step},
      {"hardware_flops_per_step", r.hardware_flops_per_step},
      {"mfu", reported_mfu(c, r)},
      {"mfu_convention", to_string(c.mfu_convention)},
      {"mfu_megatron", r.mfu},
      {"mfu_causal", r.mfu * c.causal_flops_fraction},
      {"model_flops_per_step_causal", r.model_flops_per_step * c.causal_flops_fraction},
      {"hfu", r.hfu},
      {"memory_bytes_per_gpu",
       {{"total", whole_bytes(m.total())},
        {"parameters", whole_bytes(m.parameters)},
        {"gradients", whole_bytes(m.gradients)},
        {"optimizer_states", whole_bytes(m.optimizer_states)},
        {"activations", whole_bytes(m.activations)},
        {"other", whole_bytes(m.other)}}},
      {"fits_memory", r.fits_memory},
      {"time_breakdown_s",
       {{"compute", r.time.compute_s},
        {"exposed_communication", r.time.exposed_communication_s},
        {"pipeline_bubble", r.time.pipeline_bubble_s},
        {"optimizer", r.time.optimizer_s}}},
      {"exposed_communication_s",
       {{"tp", r.exposed_tp_s},
        {"cp", r.exposed_cp_s},
        {"ep", r.exposed_ep_s},
        {"pp", r.exposed_pp_s},
        {"dp", r.exposed_dp_s}}},
      {"limiter", sim::to_string(r.limiter)},
  };
}

std::string simulation_table(const SimulationContext& c, const sim::SimulationResult& r) {
  const sim::MemoryBreakdown& m = r.memory;
  const auto line = [](const std::string& label, const std::string& value) {
    char buffer[160];
    std::snprintf(buffer, sizeof buffer, "  %-24s %s\n", label.c_str(), value.c_str());
    return std::string(buffer);
  };
  const auto share = [&](double part) { return " (" + percent(part / r.step_time_s) + ")"; };
  std::string out;
  out += "sextant simulate: " + c.model + " on " + std::to_string(c.gpus) + " x " + c.gpu +
         " (" + c.cluster + "), " + c.engine + " model\n";
  if (c.profile) out += "profile: " + profile_label(*c.profile) + "\n";
  out += "layout: " + r.layout.to_spec() + "\n";
  if (!c.pipeline_split.empty()) out += "pipeline split (per rank, chunks /): " + c.pipeline_split + "\n";
  out += "\n";
  out += "FLOPs per iteration\n";
  out += line("model", printf_string("%.4g", r.model_flops_per_step));
  out += line("hardware (+recompute)", printf_string("%.4g", r.hardware_flops_per_step));
  out += "\nMemory per GPU (the pipeline stage that needs most)\n";
  out += line("parameters", format_gib(m.parameters));
  out += line("gradients", format_gib(m.gradients));
  out += line("optimizer states", format_gib(m.optimizer_states));
  out += line("activations", format_gib(m.activations));
  out += line("other", format_gib(m.other));
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
               percent(sim::kPredictionIntervalCoverage) + " interval " +
               format_seconds(interval->first) + " - " + format_seconds(interval->second) + ")";
    }
  }
  out += line("total", total);
  out += "\nThroughput\n";
  out += line("tokens/s", printf_string("%.0f", r.tokens_per_s));
  out += line("tokens/s per GPU", printf_string("%.1f", r.tokens_per_s_per_gpu));
  const bool causal = c.mfu_convention == MfuConvention::kCausal;
  out += line("MFU", percent(reported_mfu(c, r)) +
                         (causal ? " (causal attention; Megatron's convention " +
                                       percent(r.mfu) + ")"
                                 : " (Megatron convention, full s x s attention; causal " +
                                       percent(r.mfu * c.causal_flops_fraction) + ")"));
  out += line("HFU", percent(r.hfu));
  if (r.limiter == sim::Limiter::kCompute) {
    out += line("largest non-compute cost",
                "none (compute is " + percent(r.time.compute_s / r.step_time_s) +
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
                                                percent(part / r.step_time_s) + " of the step)");
  }
  return out;
}

namespace {
// Seconds of the critical path spent on each stream, and on the optimizer step.
struct CriticalPathShare {
  std::array<double, sim::kStreamKinds> stream_s{};
  double optimizer_s = 0;
};
CriticalPathShare critical_path_share(const sim::EventSimulation& e) {
  CriticalPathShare out;
  for (std::uint32_t t : e.critical_path) {
    const double d = e.timeline.end_s[t] - e.timeline.start_s[t];
    const sim::Task& task = e.plan.tasks[t];
    if (task.kind == sim::TaskKind::kOptimizerStep) out.optimizer_s += d;
    else out.stream_s[static_cast<std::size_t>(task.stream)] += d;
  }
  return out;
}
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
                      {"peak_activation_bytes", whole_bytes(t.peak_activation_bytes)}});
  }
  const CriticalPathShare share = critical_path_share(e);
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
    const CriticalPathShare share = critical_path_share(e);
    out += "  critical path: " + std::to_string(e.critical_path.size()) + " tasks;";
    const double total = e.timeline.step_time_s;
    for (int k = 0; k < sim::kStreamKinds; ++k) {
      const double part = share.stream_s[static_cast<std::size_t>(k)];
      if (part <= 0) continue;
      out += " " + std::string(sim::stream_title(stream(k))) + " " + percent(part / total) + ",";
    }
    out += " optimizer " + percent(share.optimizer_s / total) + "\n";
  }
  if (!trace_path.empty()) out += "  trace: " + trace_path + " (open in https://ui.perfetto.dev or chrome://tracing)\n";
  return out;
}

std::string simulation_csv_header() {
  return "model,cluster,gpus,layout,step_time_s,tokens_per_s,tokens_per_s_per_gpu,"
         "model_flops_per_step,hardware_flops_per_step,mfu,hfu,memory_total_bytes,"
         "memory_parameters_bytes,memory_gradients_bytes,memory_optimizer_states_bytes,"
         "memory_activations_bytes,memory_other_bytes,fits_memory,compute_s,"
         "exposed_communication_s,pipeline_bubble_s,optimizer_s,mfu_convention,mfu_causal\n";
}

std::string simulation_csv_row(const SimulationContext& c, const sim::SimulationResult& r) {
  const sim::MemoryBreakdown& m = r.memory;
  std::string out = csv_field(c.model) + "," + csv_field(c.cluster) + "," +
                    std::to_string(c.gpus) + "," + csv_field(r.layout.to_spec());
  for (double v : {r.step_time_s, r.tokens_per_s, r.tokens_per_s_per_gpu, r.model_flops_per_step,
                   r.hardware_flops_per_step, reported_mfu(c, r), r.hfu}) {
    out += "," + printf_string("%.6g", v);
  }
  for (double v : {m.total(), m.parameters, m.gradients, m.optimizer_states, m.activations,
                   m.other}) {
    out += "," + std::to_string(whole_bytes(v));
  }
  out += r.fits_memory ? ",true" : ",false";
  for (double v : {r.time.compute_s, r.time.exposed_communication_s, r.time.pipeline_bubble_s,
                   r.time.optimizer_s}) {
    out += "," + printf_string("%.6g", v);
  }
  out += std::string(",") + to_string(c.mfu_convention) + "," +
         printf_string("%.6g", r.mfu * c.causal_flops_fraction);
  return out + "\n";
}

}  // namespace sextant::tools
