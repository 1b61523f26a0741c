#include "sim/event/critical_path.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <utility>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/topological_sort.hpp>

namespace sextant::sim {

namespace {

using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property,
                                                 boost::no_property, boost::no_property,
                                                 std::uint32_t, std::uint32_t>;
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// The "waits for" graph: an edge v → u when task v waits for task u (a
// dependency, or u runs before v on v's stream). Edges come out sorted by v,
// so Boost builds the compressed rows without sorting.
Graph waits_for_graph(const Plan& plan) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  edges.reserve(plan.deps.size() + plan.tasks.size());
  for (int s = 0; s < plan.num_stages(); ++s) {
    std::array<std::uint32_t, kStreamKinds> last;
    last.fill(kNone);
    for (std::uint32_t t = plan.stage_begin[static_cast<std::size_t>(s)];
         t < plan.stage_begin[static_cast<std::size_t>(s) + 1]; ++t) {
      for (std::uint32_t d : plan.deps_of(t)) edges.emplace_back(t, d);
      std::uint32_t& previous = last[static_cast<std::size_t>(plan.tasks[t].stream)];
      if (previous != kNone) edges.emplace_back(t, previous);
      previous = t;
    }
  }
  return Graph(boost::edges_are_sorted, edges.begin(), edges.end(),
               static_cast<std::uint32_t>(plan.tasks.size()));
}

// Boost writes a DAG's vertices in reverse topological order: each after the
// vertices its edges reach. On the waits-for graph that is each task after
// every task it waits for.
std::vector<std::uint32_t> sorted(const Plan& plan, const Graph& g) {
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
  return sorted(plan, waits_for_graph(plan));
}

std::vector<std::uint32_t> critical_path(const Plan& plan, const Timeline& timeline) {
  const std::size_t n = plan.tasks.size();
  if (n == 0) return {};
  const Graph g = waits_for_graph(plan);
  // Longest path: finish[v] = v's duration + the largest finish of what v
  // waits for, in topological order; `via` keeps that predecessor.
  std::vector<double> finish(n, 0.0);
  std::vector<std::uint32_t> via(n, kNone);
  std::uint32_t last = 0;
  for (const std::uint32_t v : sorted(plan, g)) {
    double ready = 0;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const auto u = static_cast<std::uint32_t>(boost::target(*e, g));
      if (via[v] == kNone || finish[u] > ready) {
        ready = finish[u];
        via[v] = u;
      }
    }
    finish[v] = ready + (timeline.end_s[v] - timeline.start_s[v]);
    if (finish[v] > finish[last]) last = v;
  }
  std::vector<std::uint32_t> path;
  for (std::uint32_t t = last; t != kNone; t = via[t]) path.push_back(t);
  std::reverse(path.begin(), path.end());
  return path;
}

CriticalPathTime critical_path_time(const Plan& plan, const Timeline& timeline,
                                    const std::vector<std::uint32_t>& path) {
  CriticalPathTime out;
  for (const std::uint32_t t : path) {
    const double d = timeline.end_s[t] - timeline.start_s[t];
    const Task& task = plan.tasks[t];
    if (task.kind == TaskKind::kOptimizerStep) out.optimizer_s += d;
    else out.stream_s[static_cast<std::size_t>(task.stream)] += d;
  }
  return out;
}

}  // namespace sextant::sim
