#include "sim/event/critical_path.h"

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/topological_sort.hpp>
#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <utility>


namespace sextant::sim {

namespace {

using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property,
                                                 boost::no_property, boost::no_property,
                                                 std::uint32_t, std::uint32_t>;
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Edges u → v: v waits for u (a dependency, or u runs before v on v's stream).
Graph dependency_graph(const Plan& plan) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  edges.reserve(plan.deps.size() + plan.tasks.size());
  const auto n = static_cast<std::uint32_t>(plan.tasks.size());
  for (std::uint32_t t = 0; t < n; ++t) {
    for (std::uint32_t d : plan.deps_of(t)) edges.emplace_back(d, t);
  }
  for (int s = 0; s < plan.num_stages(); ++s) {
    std::array<std::uint32_t, kStreamKinds> last;
    last.fill(kNone);
    for (std::uint32_t t = plan.stage_begin[static_cast<std::size_t>(s)];
         t < plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++t) {
      std::uint32_t& previous = last[static_cast<std::size_t>(plan.tasks[t].stream)];
      if (previous != kNone) edges.emplace_back(previous, t);
      previous = t;
    }
  }
  return Graph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), n);
}

// Boost's order: every task after all tasks that wait for it.
std::vector<std::uint32_t> reverse_topological_order(const Plan& plan, const Graph& g) {
  std::vector<std::uint32_t> order;
  order.reserve(plan.tasks.size());
  try {
    boost::topological_sort(g, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    throw std::logic_error("plan has a dependency cycle: its tasks would deadlock");
  }
  return order;
}

}  // namespace

std::vector<std::uint32_t> topological_order(const Plan& plan) {
  std::vector<std::uint32_t> order = reverse_topological_order(plan, dependency_graph(plan));
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<std::uint32_t> critical_path(const Plan& plan, const Timeline& timeline) {
  const std::size_t n = plan.tasks.size();
  if (n == 0) return {};
  const Graph g = dependency_graph(plan);
  const std::vector<std::uint32_t> order = reverse_topological_order(plan, g);
  // Longest path: finish[v] = max over predecessors u of finish[u], plus v's
  // duration; relaxing out-edges in topological order (`order` is reversed).
  std::vector<double> ready(n, 0.0);
  std::vector<std::uint32_t> via(n, kNone);
  std::vector<double> finish(n, 0.0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::uint32_t u = *it;
    finish[u] = ready[u] + (timeline.end_s[u] - timeline.start_s[u]);
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const std::uint32_t v = static_cast<std::uint32_t>(boost::target(*e, g));
      if (via[v] == kNone || finish[u] > ready[v]) {
        ready[v] = finish[u];
        via[v] = u;
      }
    }
  }
  std::uint32_t last = 0;
  for (std::uint32_t t = 1; t < n; ++t) {
    if (finish[t] > finish[last]) last = t;
  }
  std::vector<std::uint32_t> path;
  for (std::uint32_t t = last; t != kNone; t = via[t]) path.push_back(t);
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace sextant::sim
