#include "tools/simulation_output.h"

#include <cstdint>
#include <cmath>
#include <cstdio>

#include "sim/compute/prediction_interval.h"
#include "sim/core/text_format.h"

namespace sextant::tools {

namespace {
std::int64_t whole_bytes(double bytes) { return static_cast<std::int64_t>(std::llround(bytes)); }
}  // namespace

nlohmann::json runtime_parts_json(const sim::RuntimeMemory& m) {
  return {{"cuda_context", whole_bytes(m.cuda_context)},
          {"nccl_process", whole_bytes(m.nccl_process)},
          {"nccl_communicators", whole_bytes(m.nccl_communicators)},
          {"nccl_ring_buffers", whole_bytes(m.nccl_ring_buffers)},
          {"nccl_p2p_buffers", whole_bytes(m.nccl_p2p_buffers)}};
}

const char* to_string(MfuConvention c) {
  return c == MfuConvention::kCausal ? "causal" : "megatron";
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
  if (s >= 1.0) return sim::format_number("%.3f s", s);
  if (s >= 1e-3) return sim::format_number("%.2f ms", s * 1e3);
  return sim::format_number("%.1f us", s * 1e6);
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
        {"other", whole_bytes(m.other)},
        {"runtime", whole_bytes(m.runtime.total())},
        {"runtime_parts", runtime_parts_json(m.runtime)}}},
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

std::string simulation_csv_header() {
  return "model,cluster,gpus,layout,step_time_s,tokens_per_s,tokens_per_s_per_gpu,"
         "model_flops_per_step,hardware_flops_per_step,mfu,hfu,memory_total_bytes,"
         "memory_parameters_bytes,memory_gradients_bytes,memory_optimizer_states_bytes,"
         "memory_activations_bytes,memory_other_bytes,fits_memory,compute_s,"
         "exposed_communication_s,pipeline_bubble_s,optimizer_s,mfu_convention,mfu_causal,"
         "memory_runtime_bytes\n";
}

std::string simulation_csv_row(const SimulationContext& c, const sim::SimulationResult& r) {
  const sim::MemoryBreakdown& m = r.memory;
  std::string out = csv_field(c.model) + "," + csv_field(c.cluster) + "," +
                    std::to_string(c.gpus) + "," + csv_field(r.layout.to_spec());
  for (double v : {r.step_time_s, r.tokens_per_s, r.tokens_per_s_per_gpu, r.model_flops_per_step,
                   r.hardware_flops_per_step, reported_mfu(c, r), r.hfu}) {
    out += "," + sim::format_number("%.6g", v);
  }
  for (double v : {m.total(), m.parameters, m.gradients, m.optimizer_states, m.activations,
                   m.other}) {
    out += "," + std::to_string(whole_bytes(v));
  }
  out += r.fits_memory ? ",true" : ",false";
  for (double v : {r.time.compute_s, r.time.exposed_communication_s, r.time.pipeline_bubble_s,
                   r.time.optimizer_s}) {
    out += "," + sim::format_number("%.6g", v);
  }
  out += std::string(",") + to_string(c.mfu_convention) + "," +
         sim::format_number("%.6g", r.mfu * c.causal_flops_fraction);
  out += "," + std::to_string(whole_bytes(m.runtime.total()));
  return out + "\n";
}

}  // namespace sextant::tools
