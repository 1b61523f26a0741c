#include "search/complete_layout.h"

#include <algorithm>
#include <cstdio>

#include "search/split_options.h"
#include "sim/core/layout_check.h"
#include "sim/core/text_format.h"

namespace sextant::search {

using namespace sim;

namespace {
std::string gib(double bytes) { return format_gib(bytes); }
}  // namespace

std::vector<Diagnostic> explain_empty_search(const ModelConfig& m, const ClusterConfig& cluster,
                                             long gpus, const PartialLayout& p,
                                             const SearchResult& result,
                                             const SearchConstraints& constraints) {
  if (result.smallest_unfit) {
    return {{"--layout", 0, 0, "",
             "no layout fits in memory: the smallest, " + result.smallest_unfit->to_spec() +
                 ", needs " + gib(result.smallest_unfit_bytes) + " per GPU; " +
                 gib(result.memory_limit_bytes) + " available after the " +
                 std::to_string(static_cast<int>(constraints.memory_headroom * 100 + 0.5)) +
                 "% headroom"}};
  }
  // Explain with the first candidate tried or, when the given knobs left no
  // candidate at all (tp·cp not dividing the GPUs, say), with the given knobs
  // and 1 for the rest.
  ParallelLayout example = result.first_invalid.value_or(ParallelLayout{});
  if (!result.first_invalid) {
    example.tp = p.tp.value_or(1);
    example.cp = p.cp.value_or(1);
    example.pp = p.pp.value_or(1);
    example.dp = p.dp.value_or(static_cast<int>(
        std::max(1L, gpus / (static_cast<long>(example.tp) * example.cp * example.pp))));
    example.vpp = p.vpp.value_or(1);
    example.mbs = p.mbs.value_or(1);
    example.gbs = p.gbs.value_or(example.mbs * example.dp);
    example.schedule = p.schedule.value_or(example.vpp > 1 ? Schedule::kInterleaved
                                                           : Schedule::kOneFOneB);
    given_split(p).apply_to(example);
  }
  std::vector<Diagnostic> reasons = check_layout(m, cluster, gpus, example);
  if (reasons.empty()) {
    std::string why = "no valid layout exists for these knobs and constraints";
    if (constraints.max_tp) why += " (max tp " + std::to_string(*constraints.max_tp) + ")";
    if (constraints.tp_within_node) why += " (tp within a node)";
    reasons.push_back({"--layout", 0, 0, "", why});
  }
  return reasons;
}

Completion complete_layout(const ModelConfig& m, const ClusterConfig& cluster,
                           const CostProfile& profile, long gpus, const PartialLayout& p,
                           const SearchConstraints& constraints, bool require_memory_fit) {
  SearchOptions options;
  options.constraints = constraints;
  options.top = 1;
  options.require_memory_fit = require_memory_fit;
  options.threads = 1;  // completions are small; callers may run many at once
  const SearchResult result = search_layouts(m, cluster, profile, gpus, p, options);
  Completion out;
  out.evaluated = result.evaluated;
  out.valid = result.valid;
  out.fitting = result.feasible;
  if (!result.best.empty()) {
    out.best = result.best.front();
  } else {
    out.reasons = explain_empty_search(m, cluster, gpus, p, result, constraints);
  }
  return out;
}

}  // namespace sextant::search
