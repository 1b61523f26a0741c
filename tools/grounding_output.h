// What `sextant search` says when its ranked layouts rest on mechanisms that no
// dev case uses and the engine has not run (search/mechanism_evidence.h): which
// rows use which, and the fastest layout with evidence for every mechanism
// beside the pick (search/grounded_layout.h), as a note under the table and as
// JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "search/grounded_layout.h"
#include "search/layout_search.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

/// The note under the table: the ungrounded mechanisms with the rows using
/// each, then, when the best row is one of them, `grounded` (the fastest
/// grounded layout: its layout, step time and how much slower, MFU, memory,
/// limiter and where it loses time; or why there is none). Empty when every row
/// is grounded.
std::string grounding_note(const SimulationContext& context, const sim::ClusterConfig& cluster,
                           const search::SearchResult& result,
                           const std::optional<search::GroundedAlternative>& grounded);

/// The JSON beside the results when the best row is ungrounded:
/// "grounded_runner_up": the fastest grounded layout's simulate JSON with
/// "slower_percent" (its step time over the best's, less 1, in %), "limited_by"
/// and "loses_on"; or null, with "grounded_runner_up_missing" saying why.
void add_grounding_json(nlohmann::json& search_json, const SimulationContext& context,
                        const sim::ClusterConfig& cluster, const search::SearchResult& result,
                        const search::GroundedAlternative& grounded);

}  // namespace sextant::tools
