#include "reports/scaling_rows.h"

#include <algorithm>
#include <type_traits>

#include "search/complete_layout.h"
#include "search/layout_search.h"
#include "search/rescore_with_event.h"
#include "sim/core/config_error.h"

namespace sextant::reports {

namespace {

sim::ModelConfig load_model(const ReportRowSpec& row, const sim::PresetCatalog& catalog) {
  sim::ModelConfig model = catalog.model(row.model);
  if (row.seq_length) model.seq_length = *row.seq_length;
  if (row.vocab_size) model.vocab_size = *row.vocab_size;
  return model;
}

void evaluate(ReportRow& row, const ReportSpec& spec, const sim::PresetCatalog& catalog) {
  const ReportRowSpec& s = row.spec;
  const sim::ClusterConfig cluster = catalog.cluster(s.cluster);
  sim::CostProfile profile = catalog.profile(spec.profile, cluster.gpu.name);
  sim::PartialLayout layout = s.layout;
  if (!spec.framework.empty()) {
    const sim::Framework framework = catalog.framework(spec.framework);
    profile = sim::with_framework(profile, framework);
    sim::restrict_to_framework(layout, framework, s.origin.file);
  }
  row.peak_flops_per_s = cluster.gpu.peak_bf16_flops_per_s;
  if (s.gpus > cluster.total_gpus()) {  // bad input, not an outcome: the row cannot run
    sim::Diagnostic d = s.origin;
    d.message = std::to_string(s.gpus) + " GPUs, but cluster " + cluster.name + " has " +
                std::to_string(cluster.total_gpus()) + " (" + std::to_string(cluster.num_nodes) +
                " nodes of " + std::to_string(cluster.gpus_per_node) + ")";
    throw sim::ConfigError({d});
  }
  if (spec.engine == ReportEngine::kEvent) {
    search::SearchOptions options;
    options.constraints = s.constraints;
    options.top = search::kEventCandidates;  // as search, simulate and validate replay
    search::SearchResult found =
        search::search_layouts(row.model, cluster, profile, s.gpus, layout, options);
    row.evaluated_layouts = found.evaluated;
    if (!found.best.empty()) {
      search::rescore_with_event(found.best, row.model, cluster, profile, 1);
      row.result = found.best.front();
    } else {
      row.failure = "no valid layout fits in memory";
    }
  } else {
    const search::Completion completion =
        search::complete_layout(row.model, cluster, profile, s.gpus, layout, s.constraints);
    row.evaluated_layouts = completion.evaluated;
    row.result = completion.best;
    for (const sim::Diagnostic& d : completion.reasons) {
      row.failure += (row.failure.empty() ? "" : "; ") + d.message;
    }
  }
  if (row.result) {
    row.searched = searched_knobs(layout, row.result->layout);
    row.step_time_interval = step_time_interval_of(*row.result);
  }
}

}  // namespace

std::vector<std::string> searched_knobs(const sim::PartialLayout& p,
                                        const sim::ParallelLayout& c) {
  std::vector<std::string> out;
  auto add = [&](const auto& given, const char* name, const std::string& value) {
    if (!given) out.push_back(std::string(name) + "=" + value);
  };
  add(p.tp, "tp", std::to_string(c.tp));
  add(p.pp, "pp", std::to_string(c.pp));
  add(p.vpp, "vpp", std::to_string(c.vpp));
  add(p.dp, "dp", std::to_string(c.dp));
  add(p.cp, "cp", std::to_string(c.cp));
  // Expert knobs only when they do something (ep = etp = 1 is every dense layout).
  if (c.ep > 1 || c.etp > 1) {
    add(p.ep, "ep", std::to_string(c.ep));
    add(p.etp, "etp", std::to_string(c.etp));
  }
  add(p.mbs, "mbs", std::to_string(c.mbs));
  add(p.sp, "sp", c.sp ? "1" : "0");
  add(p.recompute, "recompute", std::string(sim::to_string(c.recompute)));
  add(p.zero, "zero", std::to_string(c.zero));
  add(p.schedule, "schedule", std::string(sim::to_string(c.schedule)));
  add(p.precision, "precision", std::string(sim::to_string(c.precision)));
  return out;
}

namespace {

// Adds the diagnostics of `error` to `problems`, each once: rows that share a
// model or cluster (often through defaults) share its problem. A preset named
// in the spec that cannot be found is reported at the spec's key, not as the
// command-line option the catalog assumes.
void add_problems(const sim::ConfigError& error, const ReportRowSpec& row,
                  std::vector<sim::Diagnostic>& problems) {
  for (sim::Diagnostic d : error.diagnostics()) {
    const sim::Diagnostic* origin = d.file == "--model"     ? &row.model_origin
                                    : d.file == "--cluster" ? &row.cluster_origin
                                                            : nullptr;
    if (origin && !origin->file.empty()) {
      d.file = origin->file;
      d.line = origin->line;
      d.column = origin->column;
      d.key = origin->key;
    }
    const std::string text = d.to_string();
    const bool seen = std::any_of(problems.begin(), problems.end(),
                                  [&](const sim::Diagnostic& p) { return p.to_string() == text; });
    if (!seen) problems.push_back(std::move(d));
  }
}

}  // namespace

std::vector<ReportRow> evaluate_rows(const ReportSpec& spec, const sim::PresetCatalog& catalog) {
  // Every row's model and cluster load first: a bad preset is reported once,
  // before any row is searched.
  std::vector<sim::Diagnostic> problems;
  std::vector<ReportRow> rows;
  for (const ReportRowSpec& s : spec.rows) {
    ReportRow row;
    row.spec = s;
    try {
      row.model = load_model(s, catalog);
      catalog.cluster(s.cluster);
    } catch (const sim::ConfigError& e) {
      add_problems(e, s, problems);
    }
    rows.push_back(std::move(row));
  }
  sim::throw_if_any(std::move(problems));
  for (ReportRow& row : rows) {
    try {
      evaluate(row, spec, catalog);
    } catch (const sim::ConfigError& e) {
      add_problems(e, row.spec, problems);
    }
  }
  sim::throw_if_any(std::move(problems));
  return rows;
}

double predicted_metric(const ReportRow& row, ReferenceMetric metric) {
  const sim::SimulationResult& r = *row.result;
  switch (metric) {
    case ReferenceMetric::kMfu: return r.mfu;
    case ReferenceMetric::kStepTime: return r.step_time_s;
    case ReferenceMetric::kTokensPerSecondPerGpu: return r.tokens_per_s_per_gpu;
    case ReferenceMetric::kTflopsPerGpu:
      return r.model_flops_per_step / r.step_time_s / static_cast<double>(row.spec.gpus) / 1e12;
  }
  return 0;
}

std::optional<double> reference_step_time_s(const ReportRow& row) {
  if (!row.reference_available()) return std::nullopt;
  const ReferenceValue& ref = *row.spec.reference;
  if (ref.metric == ReferenceMetric::kStepTime) return ref.value;
  // rate ∝ 1 / step time: step_ref = step_pred · rate_pred / rate_ref
  return row.result->step_time_s * predicted_metric(row, ref.metric) / ref.value;
}

}  // namespace sextant::reports
