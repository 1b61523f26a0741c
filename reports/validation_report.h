// Predicted against measured step time for a set of published runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/validation_cases.h"
#include "search/search_constraints.h"
#include "sim/analytic/simulation_result.h"
#include "sim/core/preset_catalog.h"
#include "sim/event/event_simulation.h"

namespace sextant::reports {

struct CaseOutcome {
  ValidationCase input;
  std::optional<sim::SimulationResult> predicted;  // the best completion of the published layout
  std::string failure;                             // why there is no prediction
  double relative_error = 0;                       // (predicted − measured) / measured
};

struct ValidationSummary {
  std::vector<CaseOutcome> outcomes;
  int predicted = 0;
  double median_abs_error = 0;
  double p90_abs_error = 0;
  double worst_abs_error = 0;
  std::string worst_case_id;
};

/// Which engine predicts the step time of a completed layout.
enum class PredictionEngine { kAnalytic, kEvent };

/// Completes each case's layout with the analytical model (unpublished knobs are
/// searched) on the case's cluster preset, with the GPU's default profile or
/// `profile_path` when given. With kEvent the layout is search::complete_with_event's
/// (search::kEventCandidates candidates, `event_options`).
ValidationSummary run_validation(const std::vector<ValidationCase>& cases,
                                 const sim::PresetCatalog& catalog,
                                 const std::string& profile_path,
                                 PredictionEngine engine = PredictionEngine::kAnalytic,
                                 const sim::EventOptions& event_options = {});

/// Percentile by linear interpolation between order statistics (q in [0, 1]).
double percentile(std::vector<double> values, double q);

}  // namespace sextant::reports
