#include "search/cross_node_tp.h"

namespace sextant::search {

std::optional<sim::SimulationResult> faster_cross_node_tp(const sim::ModelConfig& model,
                                                          const sim::ClusterConfig& cluster,
                                                          const sim::CostProfile& profile, long gpus,
                                                          const sim::PartialLayout& partial,
                                                          SearchOptions options,
                                                          const sim::SimulationResult& within_node_best) {
  if (partial.tp) return std::nullopt;
  options.constraints.tp_within_node = false;
  options.top = 1;
  options.keep_all = false;
  options.progress = nullptr;
  std::optional<sim::SimulationResult> best;
  // Tensor parallel sizes the search tries are powers of two (candidate_space.cc).
  for (long tp = 2L * cluster.gpus_per_node; tp <= gpus; tp *= 2) {
    if (options.constraints.max_tp && tp > *options.constraints.max_tp) break;
    if (model.num_attention_heads % tp != 0) break;  // and every larger power of two
    sim::PartialLayout fixed = partial;
    fixed.tp = static_cast<int>(tp);
    const SearchResult r = search_layouts(model, cluster, profile, gpus, fixed, options);
    if (!r.best.empty() && (!best || r.best.front().step_time_s < best->step_time_s)) best = r.best.front();
  }
  if (best && best->step_time_s < within_node_best.step_time_s) return best;
  return std::nullopt;
}

}  // namespace sextant::search
