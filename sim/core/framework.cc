#include "sim/core/framework.h"

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

// Sets an open flag to false; a flag given true is reported.
void forbid(std::optional<bool>& knob, bool supported, const char* name,
            std::vector<std::string>& refused) {
  if (supported) return;
  if (knob.value_or(false)) refused.push_back(std::string(name) + "=1");
  knob = false;
}

}  // namespace

void restrict_to_framework(PartialLayout& l, const Framework& f, const std::string& source) {
  const FrameworkSupport& s = f.supports;
  std::vector<std::string> refused;
  if (!s.interleaved_schedule) {
    if (l.schedule == Schedule::kInterleaved) refused.push_back("schedule=1f1b-interleaved");
    if (l.vpp.value_or(1) > 1) refused.push_back("vpp=" + std::to_string(*l.vpp));
    l.vpp = 1;
    if (!l.schedule) l.schedule = Schedule::kOneFOneB;
  }
  if (!s.flash_attention) {
    if (l.attention == AttentionKernel::kFlash) refused.push_back("attention=flash");
    l.attention = AttentionKernel::kUnfused;
  }
  forbid(l.sp, s.sequence_parallel, "sp", refused);
  // An open recompute knob stays the search's, which skips selective
  // (SearchConstraints::allow_selective_recompute from the profile).
  if (!s.selective_recompute && l.recompute == Recompute::kSelective) {
    refused.push_back("recompute=selective");
  }
  forbid(l.overlap_grad_reduce, s.overlap_grad_reduce, "overlap_grad_reduce", refused);
  forbid(l.overlap_param_gather, s.overlap_param_gather, "overlap_param_gather", refused);
  forbid(l.tp_comm_overlap, s.tp_comm_overlap, "tp_comm_overlap", refused);
  // ZeRO-3 overlaps its all-gathers and reduce-scatters (parse_layout): not
  // with software that cannot overlap them.
  if (l.zero == 3 && (!s.overlap_grad_reduce || !s.overlap_param_gather))
    refused.push_back("zero=3 (modelled with its weight all-gathers and gradient reduce-scatters overlapping "
                      "compute, which this software does not do)");
  if (l.pp.value_or(1) > 1 && l.zero.value_or(0) > s.max_zero_with_pipeline) {
    refused.push_back("zero=" + std::to_string(*l.zero) + " with pp=" + std::to_string(*l.pp) +
                      " (at most zero=" + std::to_string(s.max_zero_with_pipeline) + ")");
  }
  // An open ZeRO stage with a pipeline: the highest the software runs there
  // (sharding the optimizer moves what the all-reduce moves, in less memory).
  if (l.pp.value_or(1) > 1 && !l.zero && s.max_zero_with_pipeline < 3) {
    l.zero = s.max_zero_with_pipeline;
  }
  if (refused.empty()) return;
  std::string list;
  for (const std::string& r : refused) list += (list.empty() ? "" : ", ") + r;
  throw ConfigError({{source, 0, 0, "",
                      "framework " + f.name + " cannot run " + list +
                          " (configs/frameworks/" + f.name + ".yaml, supports:)"}});
}

}  // namespace sextant::sim
