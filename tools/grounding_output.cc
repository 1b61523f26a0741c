#include "tools/grounding_output.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "search/explain_layout.h"
#include "search/mechanism_evidence.h"
#include "tools/search_output.h"

namespace sextant::tools {

namespace {

// Each ungrounded mechanism of the ranked rows with the rows (from 1) using it,
// in the order they first appear.
std::vector<std::pair<std::string, std::vector<int>>> rows_by_mechanism(const search::SearchResult& result) {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (std::size_t row = 0; row < result.best.size(); ++row) {
    for (const std::string& name : search::ungrounded_mechanisms(result.best[row].layout)) {
      auto it = out.begin();
      while (it != out.end() && it->first != name) ++it;
      if (it == out.end()) {
        out.emplace_back(name, std::vector<int>{});
        it = out.end() - 1;
      }
      it->second.push_back(static_cast<int>(row) + 1);
    }
  }
  return out;
}

std::string rows_text(const std::vector<int>& rows) {
  std::string out = rows.size() == 1 ? "row " : "rows ";
  for (std::size_t i = 0; i < rows.size(); ++i) out += (i ? ", " : "") + std::to_string(rows[i]);
  return out;
}

}  // namespace

std::string grounding_note(const SimulationContext& context, const sim::ClusterConfig& cluster,
                           const search::SearchResult& result,
                           const std::optional<search::GroundedAlternative>& grounded) {
  const auto by_mechanism = rows_by_mechanism(result);
  if (by_mechanism.empty()) return "";
  std::string out =
      "\nnote: the model's price for these mechanisms has no evidence behind it: no dev case\n"
      "  (validation/dev_cases.yaml) uses them and no engine measurement (reports/measurements/) covers them:\n";
  for (const auto& [name, rows] : by_mechanism) out += "    " + name + ": " + rows_text(rows) + "\n";
  const sim::SimulationResult& best = result.best.front();
  if (search::ungrounded_names(best.layout).empty()) {
    return out + "  The best layout (row 1) has evidence for every mechanism.\n";
  }
  if (!grounded) return out + "  The best layout rests on them.\n";
  if (!grounded->best) return out + "  The best layout rests on them; " + search::no_grounded_layout_reason(*grounded) + ".\n";
  const sim::SimulationResult& g = *grounded->best;
  const search::PickComparison comparison = search::compare_with_pick(g, best);
  char line[1024];
  std::snprintf(line, sizeof line,
                "  The fastest layout with evidence for every mechanism (the published kind) is %s:\n"
                "    %s\n"
                "    %s per step against %s, MFU %.1f %%, %s per GPU; limited by %s\n"
                "    %s\n",
                comparison.how.c_str(), short_layout(g.layout).c_str(), format_seconds(g.step_time_s).c_str(),
                format_seconds(best.step_time_s).c_str(), 100 * reported_mfu(context, g),
                format_gib(g.memory.total()).c_str(),
                search::describe_limiter(g, cluster, result.memory_limit_bytes).c_str(), comparison.loses.c_str());
  return out + line;
}

void add_grounding_json(nlohmann::json& j, const SimulationContext& context, const sim::ClusterConfig& cluster,
                        const search::SearchResult& result, const search::GroundedAlternative& grounded) {
  if (!grounded.best) {
    j["grounded_runner_up"] = nullptr;
    j["grounded_runner_up_missing"] = search::no_grounded_layout_reason(grounded);
    return;
  }
  const sim::SimulationResult& g = *grounded.best;
  const sim::SimulationResult& best = result.best.front();
  nlohmann::json runner_up = simulation_json(context, g);
  runner_up["slower_percent"] = 100 * (g.step_time_s / best.step_time_s - 1);
  runner_up["limited_by"] = search::describe_limiter(g, cluster, result.memory_limit_bytes);
  runner_up["loses_on"] = search::step_difference(g, best);
  j["grounded_runner_up"] = runner_up;
}

}  // namespace sextant::tools
