#include "sim/comm/collective_cost.h"

#include <algorithm>

namespace sextant::sim {

namespace {
double ring_bandwidth(const GroupPlacement& g, const LinkRates& r) {
  if (!g.crosses_nodes()) return r.intra_node_bytes_per_s;
  return std::min(r.intra_node_bytes_per_s, g.ranks_per_node * r.inter_node_bytes_per_s);
}
double step_latency(const GroupPlacement& g, const LinkRates& r) {
  return g.crosses_nodes() ? r.inter_node_latency_s : r.intra_node_latency_s;
}
// One ring pass (reduce-scatter or all-gather): (n−1)/n·S bytes in n−1 steps.
double ring_pass_time_s(double bytes, const GroupPlacement& g, const LinkRates& r) {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  const double n = g.size;
  return (n - 1) / n * bytes / ring_bandwidth(g, r) + (n - 1) * step_latency(g, r);
}
double launch(const GroupPlacement& g, double bytes, const LinkRates& r) {
  return g.size > 1 && bytes > 0 ? r.collective_launch_s : 0.0;
}
}  // namespace

double all_reduce_time_s(double bytes, const GroupPlacement& g, const LinkRates& r) {
  return 2.0 * ring_pass_time_s(bytes, g, r) + launch(g, bytes, r);
}

double reduce_scatter_time_s(double bytes, const GroupPlacement& g, const LinkRates& r) {
  return ring_pass_time_s(bytes, g, r) + launch(g, bytes, r);
}

double all_gather_time_s(double bytes, const GroupPlacement& g, const LinkRates& r) {
  return ring_pass_time_s(bytes, g, r) + launch(g, bytes, r);
}

double all_to_all_time_s(double bytes, const GroupPlacement& g, const LinkRates& r) {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  const double n = g.size;
  const double within_node = (g.ranks_per_node - 1) / n * bytes / r.intra_node_bytes_per_s;
  const double across_nodes = (n - g.ranks_per_node) / n * bytes / r.inter_node_bytes_per_s;
  return std::max(within_node, across_nodes) + (n - 1) * step_latency(g, r) + r.collective_launch_s;
}

double p2p_time_s(double bytes, bool crosses_nodes, const LinkRates& r) {
  if (bytes <= 0) return 0.0;
  return r.collective_launch_s +
         (crosses_nodes ? bytes / r.inter_node_bytes_per_s + r.inter_node_latency_s
                        : bytes / r.intra_node_bytes_per_s + r.intra_node_latency_s);
}

}  // namespace sextant::sim
