#include "reports/validation_report.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "search/complete_layout.h"
#include "search/layout_search.h"
#include "search/rescore_with_event.h"
#include "sim/core/config_error.h"

namespace sextant::reports {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

ValidationSummary run_validation(const std::vector<ValidationCase>& cases,
                                 const sim::PresetCatalog& catalog,
                                 const std::string& profile_path, PredictionEngine engine,
                                 const sim::EventOptions& event_options) {
  ValidationSummary summary;
  std::vector<double> errors;
  for (const ValidationCase& c : cases) {
    CaseOutcome outcome{c, std::nullopt, "", 0.0};
    try {
      const sim::ClusterConfig cluster = catalog.cluster(c.cluster_preset);
      sim::CostProfile profile = catalog.profile(profile_path, cluster.gpu.name);
      sim::PartialLayout layout = c.layout;
      if (!c.framework.empty()) {
        const sim::Framework framework = catalog.framework(c.framework);
        profile = sim::with_framework(profile, framework);
        // The case format has no attention key: the kernel read_case set is the
        // source year's default, and what the software had overrides it.
        if (!framework.supports.flash_attention) layout.attention.reset();
        sim::restrict_to_framework(layout, framework, c.id);
      }
      const search::Completion completion =
          search::complete_layout(c.model, cluster, profile, c.num_gpus, layout);
      if (completion.best && engine == PredictionEngine::kEvent) {
        outcome.predicted =
            search::complete_with_event(c.model, cluster, profile, c.num_gpus, layout, {},
                                        search::kEventCandidates, event_options)
                ->result;
      } else {
        outcome.predicted = completion.best;
      }
      if (outcome.predicted) {
        const sim::SimulationResult& predicted = *outcome.predicted;
        outcome.relative_error =
            (predicted.step_time_s - c.measured_step_time_s) / c.measured_step_time_s;
        errors.push_back(std::abs(outcome.relative_error));
        ++summary.predicted;
        if (std::abs(outcome.relative_error) >= summary.worst_abs_error) {
          summary.worst_abs_error = std::abs(outcome.relative_error);
          summary.worst_case_id = c.id;
        }
      } else {
        for (const sim::Diagnostic& d : completion.reasons) {
          outcome.failure += (outcome.failure.empty() ? "" : "; ") + d.message;
        }
      }
    } catch (const sim::ConfigError& e) {
      outcome.failure = e.what();
    } catch (const std::invalid_argument& e) {  // the event engine's schedule cannot run it
      outcome.failure = e.what();
    }
    summary.outcomes.push_back(std::move(outcome));
  }
  summary.median_abs_error = percentile(errors, 0.5);
  summary.p90_abs_error = percentile(errors, 0.9);
  return summary;
}

}  // namespace sextant::reports
