#include "engine/model/expert_load.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sextant::engine {

std::vector<double> rows_by_ep_rank(const std::vector<std::vector<std::int64_t>>& expert_rows, int ep) {
  if (ep < 1) throw std::invalid_argument("rows_by_ep_rank: ep " + std::to_string(ep) + " < 1");
  std::vector<double> rows(static_cast<std::size_t>(ep), 0.0);
  for (std::size_t l = 0; l < expert_rows.size(); ++l) {
    const std::size_t experts = expert_rows[l].size();
    if (experts % static_cast<std::size_t>(ep) != 0)
      throw std::invalid_argument("rows_by_ep_rank: MoE layer " + std::to_string(l) + " has " +
                                  std::to_string(experts) + " experts, not a multiple of ep " + std::to_string(ep));
    const std::size_t local = experts / static_cast<std::size_t>(ep);
    for (std::size_t e = 0; e < experts; ++e) rows[e / local] += static_cast<double>(expert_rows[l][e]);
  }
  return rows;
}

double expert_load_factor(std::span<const double> group_rows, double routed_pairs) {
  if (group_rows.empty() || routed_pairs <= 0) return 0.0;
  return *std::max_element(group_rows.begin(), group_rows.end()) / routed_pairs;
}

}  // namespace sextant::engine
