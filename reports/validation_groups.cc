#include "reports/validation_groups.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace sextant::reports {

std::string source_group(const std::string& source) {
  // The publication's name ends where its details begin: a comma ("Narayanan et
  // al., 'Efficient ..."), a quoted section title ("README.md 'Performance
  // ...'"), " at commit ...", or a parenthesis.
  std::size_t end = source.size();
  for (const char* separator : {",", " '", " at ", " ("}) {
    end = std::min(end, source.find(separator));
  }
  std::string group = source.substr(0, end);
  while (!group.empty() && group.back() == ' ') group.pop_back();
  return group.empty() ? "(no source)" : group;
}

namespace {

std::string precision_of(const CaseOutcome& o) {
  return std::string(sim::to_string(o.input.layout.precision.value_or(sim::Precision::kBf16)));
}

GroupSummary summarize(std::string dimension, std::string name,
                       const std::vector<const CaseOutcome*>& members) {
  GroupSummary g;
  g.dimension = std::move(dimension);
  g.name = std::move(name);
  g.cases = static_cast<int>(members.size());
  std::vector<double> errors;
  for (const CaseOutcome* o : members) {
    if (!o->predicted) continue;
    ++g.predicted;
    errors.push_back(std::abs(o->relative_error));
  }
  if (!errors.empty()) {
    g.median_abs_error = percentile(errors, 0.5);
    g.p90_abs_error = percentile(errors, 0.9);
    g.worst_abs_error = *std::max_element(errors.begin(), errors.end());
  }
  return g;
}

}  // namespace

std::vector<GroupSummary> summarize_by_group(const ValidationSummary& summary) {
  using KeyOf = std::function<std::string(const CaseOutcome&)>;
  const std::vector<std::pair<std::string, KeyOf>> dimensions = {
      {"source", [](const CaseOutcome& o) { return o.input.source_group; }},
      {"gpu", [](const CaseOutcome& o) { return o.input.cluster_preset; }},
      {"precision", precision_of},
      {"model", [](const CaseOutcome& o) { return std::string(o.input.model.moe ? "moe" : "dense"); }},
  };
  std::vector<GroupSummary> groups;
  for (const auto& [dimension, key_of] : dimensions) {
    std::vector<std::string> names;
    for (const CaseOutcome& o : summary.outcomes) {
      const std::string name = key_of(o);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const std::string& name : names) {
      std::vector<const CaseOutcome*> members;
      for (const CaseOutcome& o : summary.outcomes) {
        if (key_of(o) == name) members.push_back(&o);
      }
      groups.push_back(summarize(dimension, name, members));
    }
  }
  return groups;
}

}  // namespace sextant::reports
