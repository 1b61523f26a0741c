#include "sim/core/framework.h"

#include <algorithm>
#include <vector>

#include "sim/core/config_error.h"

namespace sextant::sim {

CostProfile with_framework(CostProfile profile, const Framework& framework) {
  if (framework.sustained_compute_fraction) {
    profile.sustained_compute_fraction = *framework.sustained_compute_fraction;
  }
  profile.behaviour = framework.behaviour;
  profile.supports = framework.supports;
  profile.framework = framework.name;
  return profile;
}

namespace {

// A knob value the software cannot run, with the supports: key that says so.
struct Refusals {
  std::vector<std::string> items;
  void add(const std::string& what, const char* key) { items.push_back(what + " (supports." + key + ")"); }
};

// Sets an open flag to false; a flag given true is reported.
void forbid(std::optional<bool>& knob, bool supported, const char* name, const char* key, Refusals& refused) {
  if (supported) return;
  if (knob.value_or(false)) refused.add(std::string(name) + "=1", key);
  knob = false;
}

std::string str(int v) { return std::to_string(v); }

}  // namespace

void restrict_to_framework(PartialLayout& l, const Framework& f, const std::string& source) {
  const FrameworkSupport& s = f.supports;
  Refusals refused;
  if (l.schedule && !s.runs(*l.schedule)) refused.add("schedule=" + std::string(to_string(*l.schedule)), "schedules");
  if (!s.runs(Schedule::kInterleaved)) {
    if (l.vpp.value_or(1) > 1) refused.add("vpp=" + str(*l.vpp) + " (needs schedule=1f1b-interleaved)", "schedules");
    l.vpp = 1;
    if (!l.schedule && s.runs(Schedule::kOneFOneB)) l.schedule = Schedule::kOneFOneB;
  }
  if (l.precision && !s.runs(*l.precision)) refused.add("precision=" + std::string(to_string(*l.precision)), "precisions");
  if (!s.flash_attention) {
    if (l.attention == AttentionKernel::kFlash) refused.add("attention=flash", "flash_attention");
    l.attention = AttentionKernel::kUnfused;
  }
  forbid(l.sp, s.sequence_parallel, "sp", "sequence_parallel", refused);
  // An open recompute knob stays the search's, which skips selective
  // (SearchConstraints::allow_selective_recompute from the profile).
  if (!s.selective_recompute && l.recompute == Recompute::kSelective) {
    refused.add("recompute=selective", "selective_recompute");
  }
  forbid(l.overlap_grad_reduce, s.overlap_grad_reduce, "overlap_grad_reduce", "overlap_grad_reduce", refused);
  forbid(l.overlap_param_gather, s.overlap_param_gather, "overlap_param_gather", "overlap_param_gather", refused);
  forbid(l.tp_comm_overlap, s.tp_comm_overlap, "tp_comm_overlap", "tp_comm_overlap", refused);
  if (!s.context_parallel) {
    if (l.cp.value_or(1) > 1) refused.add("cp=" + str(*l.cp), "context_parallel");
    l.cp = 1;
  }
  if (!s.expert_parallel) {
    if (l.ep.value_or(1) > 1) refused.add("ep=" + str(*l.ep), "expert_parallel");
    if (l.etp.value_or(1) > 1) refused.add("etp=" + str(*l.etp), "expert_parallel");
    l.ep = 1;
    l.etp = 1;
  }
  if (!s.uneven_pipeline_split) {
    if (l.first_stage_layers.value_or(0) > 0) refused.add("first_stage_layers=" + str(*l.first_stage_layers), "uneven_pipeline_split");
    if (l.last_stage_layers.value_or(0) > 0) refused.add("last_stage_layers=" + str(*l.last_stage_layers), "uneven_pipeline_split");
    if (l.embedding_in_split.value_or(false)) refused.add("embedding_in_split=1", "uneven_pipeline_split");
    if (l.loss_in_split.value_or(false)) refused.add("loss_in_split=1", "uneven_pipeline_split");
    if (l.pp_layout) refused.add("pp_layout=" + *l.pp_layout, "uneven_pipeline_split");
    // The even split only: given, so the search tries no other.
    l.first_stage_layers = 0;
    l.last_stage_layers = 0;
    l.embedding_in_split = false;
    l.loss_in_split = false;
    l.pp_layout.reset();
  }
  // ZeRO-3 is FSDP (naming an implementation means zero=3, parse_layout).
  if (l.fsdp && !s.runs(*l.fsdp)) refused.add("fsdp=" + std::string(to_string(*l.fsdp)), "fsdp");
  if (l.zero == 3 && s.fsdp.empty()) refused.add("zero=3 (no FSDP implementation)", "fsdp");
  // ZeRO-3 overlaps its all-gathers and reduce-scatters (parse_layout): not
  // with software that cannot overlap them.
  if (l.zero == 3 && (!s.overlap_grad_reduce || !s.overlap_param_gather))
    refused.add("zero=3 (modelled with its weight all-gathers and gradient reduce-scatters overlapping compute, "
                "which this software does not do)",
                !s.overlap_grad_reduce ? "overlap_grad_reduce" : "overlap_param_gather");
  if (l.zero && !(*l.zero == 3 && s.fsdp.empty())) {
    const int zero = *l.zero;
    if (l.pp && zero > s.max_zero(*l.pp)) {
      refused.add("zero=" + str(zero) + " with pp=" + str(*l.pp) + " (at most zero=" + str(s.max_zero(*l.pp)) + ")",
                  s.max_zero_key(*l.pp));
    } else if (!l.pp && zero > std::max(s.max_zero(1), s.max_zero(2))) {
      refused.add("zero=" + str(zero) + " (at most zero=" + str(s.max_zero(1)) + " without a pipeline, zero=" +
                      str(s.max_zero(2)) + " with one)",
                  "max_zero_without_pipeline");
    }
  }
  // An open ZeRO stage with a pipeline: the highest the software runs there
  // (sharding the optimizer moves what the all-reduce moves, in less memory);
  // without one, the search chooses among the stages it runs
  // (SearchConstraints::supports), or the one stage where there is one.
  if (!l.zero && !l.fsdp) {
    if (l.pp.value_or(1) > 1 && s.max_zero(*l.pp) < 3) l.zero = s.max_zero(*l.pp);
    else if (s.max_zero(1) == 0 && s.max_zero(2) == 0) l.zero = 0;
    else if (l.pp == 1 && s.max_zero(1) == 0) l.zero = 0;
  }
  if (refused.items.empty()) return;
  std::string list;
  for (const std::string& r : refused.items) list += (list.empty() ? "" : ", ") + r;
  throw ConfigError({{source, 0, 0, "",
                      "framework " + f.name + " cannot run " + list + " (configs/frameworks/" + f.name + ".yaml)"}});
}

}  // namespace sextant::sim
