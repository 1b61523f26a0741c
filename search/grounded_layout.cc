#include "search/grounded_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "search/mechanism_evidence.h"
#include "sim/core/text_format.h"

namespace sextant::search {

using sim::PartialLayout;
using sim::SimulationResult;

namespace {

// The partial layouts whose searches together cover every grounded completion
// of `partial`: the knobs the search chooses among grounded and ungrounded
// values, fixed to their grounded ones. The search offers the other ungrounded
// mechanisms (GPipe, ZB-H1) only when --layout names them, which
// fastest_grounded_layout refuses before this.
std::vector<PartialLayout> grounded_passes(const PartialLayout& partial) {
  PartialLayout base = partial;
  if (!base.ep) base.ep = 1;
  if (!base.etp) base.etp = 1;
  if (!base.moe_a2a_overlap) base.moe_a2a_overlap = false;
  if (!base.moe_shared_expert_overlap) base.moe_shared_expert_overlap = false;
  if (base.zero) return {base};
  std::vector<PartialLayout> out;
  for (int zero : {0, 1}) {
    PartialLayout p = base;
    p.zero = zero;
    out.push_back(p);
  }
  return out;
}

}  // namespace

GroundedAlternative fastest_grounded_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                                            const sim::CostProfile& profile, long gpus,
                                            const PartialLayout& partial, SearchOptions options) {
  GroundedAlternative out;
  out.fixed_by_layout = ungrounded_mechanisms(stated_layout(partial));
  if (!out.fixed_by_layout.empty()) return out;
  options.top = 1;
  options.keep_all = false;
  options.require_memory_fit = true;
  options.progress = nullptr;
  for (const PartialLayout& pass : grounded_passes(partial)) {
    const SearchResult r = search_layouts(model, cluster, profile, gpus, pass, options);
    if (r.best.empty()) continue;
    const SimulationResult& best = r.best.front();
    // Every layout of these passes is grounded unless the candidate space
    // offers a new ungrounded value of its own; such a pick is not shown as grounded.
    if (!ungrounded_mechanisms(best.layout).empty()) continue;
    if (!out.best || ranks_before(best, *out.best)) out.best = best;
  }
  return out;
}

std::string join_mechanisms(const std::vector<std::string>& mechanisms) {
  std::string out;
  for (const std::string& m : mechanisms) out += (out.empty() ? "" : "; ") + m;
  return out;
}

std::string no_grounded_layout_reason(const GroundedAlternative& alternative) {
  if (!alternative.fixed_by_layout.empty())
    return "--layout fixes " + join_mechanisms(alternative.fixed_by_layout) +
           "; leave it out to rank layouts with evidence for every mechanism";
  return "no layout whose every mechanism has evidence is valid and fits within --layout and the search's "
         "constraints";
}

PickComparison compare_with_pick(const SimulationResult& grounded, const SimulationResult& pick) {
  const double slower = grounded.step_time_s / pick.step_time_s - 1;
  if (slower < 5e-4) {
    return {"as fast", "it ranks below on memory alone: " + sim::format_gib(grounded.memory.total(), 2) +
                           " against " + sim::format_gib(pick.memory.total(), 2) + " per GPU"};
  }
  return {sim::format_number("%.1f %% slower", 100 * slower), "it loses on: " + step_difference(grounded, pick)};
}

std::string step_difference(const SimulationResult& slower, const SimulationResult& faster) {
  const std::pair<const char*, double> parts[] = {
      {"compute", slower.time.compute_s - faster.time.compute_s},
      {"pipeline bubble", slower.time.pipeline_bubble_s - faster.time.pipeline_bubble_s},
      {"optimizer step", slower.time.optimizer_s - faster.time.optimizer_s},
      {"exposed tensor-parallel communication", slower.exposed_tp_s - faster.exposed_tp_s},
      {"exposed context-parallel communication", slower.exposed_cp_s - faster.exposed_cp_s},
      {"exposed expert-parallel all-to-all", slower.exposed_ep_s - faster.exposed_ep_s},
      {"exposed pipeline send/recv", slower.exposed_pp_s - faster.exposed_pp_s},
      {"exposed data-parallel sync", slower.exposed_dp_s - faster.exposed_dp_s},
  };
  std::vector<std::pair<const char*, double>> shown;
  for (const auto& part : parts) {
    if (std::abs(part.second) >= 1e-3 * faster.step_time_s) shown.push_back(part);
  }
  // Growths first, largest first; then what shrank, largest first.
  std::sort(shown.begin(), shown.end(), [](const auto& a, const auto& b) {
    if ((a.second > 0) != (b.second > 0)) return a.second > 0;
    return std::abs(a.second) > std::abs(b.second);
  });
  std::string out;
  bool in_shrinks = false;
  for (const auto& [name, delta_s] : shown) {
    const char* separator = out.empty() ? "" : ", ";
    if (delta_s < 0 && !in_shrinks) {
      separator = out.empty() ? "" : "; ";
      in_shrinks = true;
    }
    char item[128];
    std::snprintf(item, sizeof item, "%s%s %+.3f s", separator, name, delta_s);
    out += item;
  }
  return out.empty() ? "no part of the step differs by 0.1 %" : out;
}

}  // namespace sextant::search
