#include "reports/scaling_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/memory/parameter_count.h"

namespace sextant::reports {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string model_size_label(const sim::ModelConfig& model) {
  const double params = sim::total_params(model);
  if (params >= 1e12) return fixed(params / 1e12, 2) + "T";
  if (params >= 1e10) return fixed(params / 1e9, 0) + "B";
  if (params >= 1e9) return fixed(params / 1e9, 1) + "B";
  return fixed(params / 1e6, 0) + "M";
}

std::vector<std::string> reference_sources(const std::vector<ReportRow>& rows) {
  std::vector<std::string> sources;
  for (const ReportRow& r : rows) {
    if (!r.spec.reference) continue;
    if (std::find(sources.begin(), sources.end(), r.spec.reference->source) == sources.end()) {
      sources.push_back(r.spec.reference->source);
    }
  }
  return sources;
}

double reference_error(const ReportRow& row) {
  const ReferenceValue& ref = *row.spec.reference;
  const double predicted = predicted_metric(row, ref.metric);
  if (ref.metric == ReferenceMetric::kMfu) return 100.0 * (predicted - ref.value);
  return 100.0 * (predicted - ref.value) / ref.value;
}

namespace {

struct MetricColumns {
  const char* name;      // as the header says it
  const char* unit;      // of the value column
  double scale;          // value · scale is shown
  int decimals;
};

MetricColumns metric_columns(ReferenceMetric m) {
  switch (m) {
    case ReferenceMetric::kMfu: return {"MFU", "%", 100, 1};
    case ReferenceMetric::kStepTime: return {"step time", "s", 1, 3};
    case ReferenceMetric::kTokensPerSecondPerGpu: return {"tokens/s/GPU", "", 1, 0};
    case ReferenceMetric::kTflopsPerGpu: return {"TFLOP/s/GPU", "", 1, 1};
  }
  return {"", "", 1, 0};
}

}  // namespace

Table scaling_table(const std::vector<ReportRow>& rows) {
  Table t;
  for (const char* h : {"model", "size"}) t.add_column(h, false);
  for (const char* h : {"hidden", "heads", "layers", "GPUs"}) t.add_column(h, true);
  t.add_column("precision", false);
  for (const char* h : {"GBS", "MBS", "seq", "TP", "PP", "CP", "VP", "EP", "DP", "tokens/s/GPU",
                        "model TFLOP/s/GPU", "MFU (%)", "aggregate PFLOP/s",
                        "memory/GPU (GiB)", "step time (s)"}) {
    t.add_column(h, true);
  }
  const bool any_interval = std::any_of(rows.begin(), rows.end(), [](const ReportRow& r) {
    return r.step_time_interval.has_value();
  });
  if (any_interval) t.add_column("step time interval (s)", true);

  // One value/error column pair per reference metric present.
  std::vector<ReferenceMetric> metrics;
  bool any_published = false, any_measured = false;
  for (const ReportRow& r : rows) {
    if (!r.spec.reference) continue;
    (r.spec.reference->measured ? any_measured : any_published) = true;
    if (std::find(metrics.begin(), metrics.end(), r.spec.reference->metric) == metrics.end()) {
      metrics.push_back(r.spec.reference->metric);
    }
  }
  const std::string what = any_published && any_measured ? "published/measured"
                           : any_measured                ? "measured"
                                                         : "published";
  for (ReferenceMetric m : metrics) {
    const MetricColumns c = metric_columns(m);
    const std::string unit = *c.unit ? std::string(" (") + c.unit + ")" : "";
    t.add_column(what + " " + c.name + unit, true);
    t.add_column(m == ReferenceMetric::kMfu ? "MFU error (pt)" : std::string(c.name) + " error (%)",
                 true);
  }
  if (!metrics.empty()) t.add_column("src", false);
  t.add_column("chosen by search", false);

  const std::vector<std::string> sources = reference_sources(rows);
  for (const ReportRow& r : rows) {
    const sim::ModelConfig& m = r.model;
    std::vector<std::string> cells = {m.name,
                                      model_size_label(m),
                                      std::to_string(m.hidden_size),
                                      std::to_string(m.num_attention_heads),
                                      std::to_string(m.num_layers),
                                      std::to_string(r.spec.gpus)};
    if (r.result) {
      const sim::SimulationResult& s = *r.result;
      const sim::ParallelLayout& l = s.layout;
      const double gpus = static_cast<double>(r.spec.gpus);
      cells.insert(cells.end(),
                   {std::string(sim::to_string(l.precision)), std::to_string(l.gbs),
                    std::to_string(l.mbs), std::to_string(m.seq_length), std::to_string(l.tp),
                    std::to_string(l.pp), std::to_string(l.cp), std::to_string(l.vpp),
                    std::to_string(l.ep), std::to_string(l.dp), fixed(s.tokens_per_s_per_gpu, 0),
                    fixed(s.model_flops_per_step / s.step_time_s / gpus / 1e12, 1),
                    fixed(100 * s.mfu, 1), fixed(s.model_flops_per_step / s.step_time_s / 1e15, 1),
                    fixed(s.memory.total() / (1024.0 * 1024.0 * 1024.0), 1),
                    fixed(s.step_time_s, 3)});
    } else {
      cells.insert(cells.end(), {"-", std::to_string(r.spec.global_batch), "-",
                                 std::to_string(m.seq_length)});
      for (int i = 0; i < 12; ++i) cells.push_back("-");
    }
    if (any_interval) {
      cells.push_back(r.step_time_interval ? fixed(r.step_time_interval->low_s, 3) + "–" +
                                                 fixed(r.step_time_interval->high_s, 3)
                                           : "");
    }
    for (ReferenceMetric metric : metrics) {
      const bool here = r.spec.reference && r.spec.reference->metric == metric;
      const MetricColumns c = metric_columns(metric);
      cells.push_back(here ? fixed(r.spec.reference->value * c.scale, c.decimals) : "");
      cells.push_back(here && r.result ? (reference_error(r) >= 0 ? "+" : "") +
                                             fixed(reference_error(r), 1)
                                       : "");
    }
    if (!metrics.empty()) {
      std::string src;
      if (r.spec.reference) {
        const auto at = std::find(sources.begin(), sources.end(), r.spec.reference->source);
        src = "[" + std::to_string(at - sources.begin() + 1) + "]";
      }
      cells.push_back(src);
    }
    std::string searched;
    for (const std::string& k : r.searched) searched += (searched.empty() ? "" : " ") + k;
    if (!r.result) searched = "not predicted: " + r.failure;
    else if (r.searched.empty()) searched = "(layout given)";
    cells.push_back(searched);
    t.rows.push_back(std::move(cells));
  }
  return t;
}

}  // namespace sextant::reports
