#include "reports/scaling_plots.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "reports/bar_chart.h"
#include "reports/scaling_table.h"
#include "reports/xy_chart.h"

namespace sextant::reports {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows with a result, ordered by GPU count (stable: spec order among equals).
std::vector<const ReportRow*> plotted_rows(const std::vector<ReportRow>& rows) {
  std::vector<const ReportRow*> out;
  for (const ReportRow& r : rows) {
    if (r.result) out.push_back(&r);
  }
  std::stable_sort(out.begin(), out.end(), [](const ReportRow* a, const ReportRow* b) {
    return a->spec.gpus < b->spec.gpus;
  });
  return out;
}

std::string reference_word(const std::vector<const ReportRow*>& rows) {
  bool published = false, measured = false;
  for (const ReportRow* r : rows) {
    if (r->spec.reference) (r->spec.reference->measured ? measured : published) = true;
  }
  return published && measured ? "published/measured" : measured ? "measured" : "published";
}

std::vector<double> gpu_ticks(const std::vector<const ReportRow*>& rows) {
  std::vector<double> ticks;
  for (const ReportRow* r : rows) {
    const double g = static_cast<double>(r->spec.gpus);
    if (ticks.empty() || ticks.back() != g) ticks.push_back(g);
  }
  return ticks;
}

// A quantity of each row, from its result or (for references) from the step
// time its reference implies (NaN where there is none).
template <typename F>
std::vector<double> column(const std::vector<const ReportRow*>& rows, F f) {
  std::vector<double> out;
  for (const ReportRow* r : rows) out.push_back(f(*r));
  return out;
}

double model_flops_per_s(const ReportRow& r, double step_s) {
  return r.result->model_flops_per_step / step_s;
}

double tokens_per_s(const ReportRow& r, double step_s) {
  return static_cast<double>(r.result->layout.gbs) * static_cast<double>(r.model.seq_length) /
         step_s;
}

double reference_or_nan(const ReportRow& r, double (*f)(const ReportRow&, double)) {
  const std::optional<double> step = reference_step_time_s(r);
  return step ? f(r, *step) : kNaN;
}

bool any_finite(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

XyChartSpec gpu_chart(const std::string& title, const std::string& y_label,
                      const std::vector<const ReportRow*>& rows) {
  XyChartSpec c;
  c.title = title;
  c.x = {"GPUs (log scale)", true, gpu_ticks(rows), std::nullopt, std::nullopt, false};
  c.y.label = y_label;
  return c;
}

std::string efficiency_label(ScalingKind kind) {
  return kind == ScalingKind::kStrong
             ? "tokens/s per GPU relative to the smallest point"
             : "model FLOP/s per GPU relative to the smallest point";
}

}  // namespace

std::vector<double> scaling_efficiency_percent(const std::vector<ReportRow>& rows,
                                               ScalingKind kind) {
  std::vector<double> out(rows.size(), kNaN);
  const ReportRow* base = nullptr;
  for (const ReportRow& r : rows) {
    if (r.result && (!base || r.spec.gpus < base->spec.gpus)) base = &r;
  }
  if (!base) return out;
  auto per_gpu = [kind](const ReportRow& r) {
    const double gpus = static_cast<double>(r.spec.gpus);
    return kind == ScalingKind::kStrong ? r.result->tokens_per_s / gpus
                                        : r.result->model_flops_per_step / r.result->step_time_s / gpus;
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].result) out[i] = 100.0 * per_gpu(rows[i]) / per_gpu(*base);
  }
  return out;
}

std::vector<NamedPlot> scaling_plots(const std::vector<ReportRow>& all_rows, ScalingKind kind) {
  const std::vector<const ReportRow*> rows = plotted_rows(all_rows);
  std::vector<NamedPlot> plots;
  if (rows.empty()) return plots;
  const std::vector<std::string>& palette = chart_palette();
  const std::string ref = reference_word(rows);
  const std::vector<double> gpus =
      column(rows, [](const ReportRow& r) { return static_cast<double>(r.spec.gpus); });
  const bool strong = kind == ScalingKind::kStrong;

  // MFU against GPUs.
  {
    XyChartSpec c = gpu_chart("MFU against GPUs", "MFU (%)", rows);
    const std::vector<double> mfu =
        column(rows, [](const ReportRow& r) { return 100.0 * r.result->mfu; });
    const std::vector<double> published = column(rows, [](const ReportRow& r) {
      const std::optional<double> step = reference_step_time_s(r);
      return step ? 100.0 * r.result->mfu * r.result->step_time_s / *step : kNaN;
    });
    if (strong) {
      c.series.push_back({"ideal (MFU of the smallest point)", gpus,
                          std::vector<double>(gpus.size(), mfu.front()), SeriesStyle::kDashedLine,
                          palette[7]});
    }
    c.series.push_back({"predicted", gpus, mfu, SeriesStyle::kLineWithMarkers, palette[0]});
    if (any_finite(published)) {
      c.series.push_back({ref, gpus, published, SeriesStyle::kHollowMarkers, palette[1]});
    }
    plots.push_back({"mfu.svg", "Model FLOPs utilisation (model FLOPs over the dense BF16 peak)"
                                " at each GPU count.", render_xy_chart(c)});
  }

  // Throughput against GPUs, with the ideal line through the smallest point.
  {
    const bool tokens = strong;  // weak scaling changes the model: compare FLOP/s
    auto rate = tokens ? +[](const ReportRow& r, double s) { return tokens_per_s(r, s) / 1e6; }
                       : +[](const ReportRow& r, double s) { return model_flops_per_s(r, s) / 1e15; };
    XyChartSpec c = gpu_chart(tokens ? "Throughput against GPUs" : "Aggregate model FLOP/s against GPUs",
                              tokens ? "million tokens/s (log scale)" : "model PFLOP/s (log scale)",
                              rows);
    c.y.log = true;
    const std::vector<double> predicted =
        column(rows, [&](const ReportRow& r) { return rate(r, r.result->step_time_s); });
    std::vector<double> ideal;
    for (double g : gpus) ideal.push_back(predicted.front() * g / gpus.front());
    c.series.push_back({"ideal linear scaling", gpus, ideal, SeriesStyle::kDashedLine, palette[7]});
    c.series.push_back({"predicted", gpus, predicted, SeriesStyle::kLineWithMarkers, palette[0]});
    const std::vector<double> published =
        column(rows, [&](const ReportRow& r) { return reference_or_nan(r, rate); });
    if (any_finite(published)) {
      c.series.push_back({ref, gpus, published, SeriesStyle::kHollowMarkers, palette[1]});
    }
    plots.push_back({"throughput.svg",
                     tokens ? "Training throughput in tokens per second; the dashed line is "
                              "perfect linear scaling from the smallest point."
                            : "Aggregate model FLOP/s; the dashed line is perfect linear "
                              "scaling of the smallest point's per-GPU rate.",
                     render_xy_chart(c)});
  }

  // Scaling efficiency.
  {
    std::vector<ReportRow> ordered;
    for (const ReportRow* r : rows) ordered.push_back(*r);
    const std::vector<double> efficiency = scaling_efficiency_percent(ordered, kind);
    XyChartSpec c = gpu_chart("Scaling efficiency", "efficiency (%)", rows);
    c.y.include_zero = false;
    c.series.push_back({"ideal", gpus, std::vector<double>(gpus.size(), 100.0),
                        SeriesStyle::kDashedLine, palette[7]});
    c.series.push_back({"predicted", gpus, efficiency, SeriesStyle::kLineWithMarkers, palette[0]});
    // The references' efficiency needs a reference at the smallest point too.
    if (reference_step_time_s(*rows.front())) {
      auto per_gpu = [strong](const ReportRow& r, double s) {
        return (strong ? tokens_per_s(r, s) : model_flops_per_s(r, s)) /
               static_cast<double>(r.spec.gpus);
      };
      const double base = per_gpu(*rows.front(), *reference_step_time_s(*rows.front()));
      const std::vector<double> published = column(rows, [&](const ReportRow& r) {
        const std::optional<double> step = reference_step_time_s(r);
        return step ? 100.0 * per_gpu(r, *step) / base : kNaN;
      });
      c.series.push_back({ref, gpus, published, SeriesStyle::kHollowMarkers, palette[1]});
    }
    plots.push_back({"efficiency.svg",
                     "Scaling efficiency: " + efficiency_label(kind) + " (100 % is ideal).",
                     render_xy_chart(c)});
  }

  // Step-time breakdown, as shares of each point's step time.
  {
    BarChartSpec c;
    c.title = "Where the step time goes";
    c.x_label = strong ? "GPUs (step time above each bar)" : "model and GPUs (step time above each bar)";
    c.y = {"share of the step time (%)", false, {0, 20, 40, 60, 80, 100}, 0.0, 100.0, true};
    c.stacked = true;
    struct Part {
      const char* name;
      double (*seconds)(const sim::SimulationResult&);
    };
    const Part parts[] = {
        {"compute", [](const sim::SimulationResult& s) { return s.time.compute_s; }},
        {"TP comm.", [](const sim::SimulationResult& s) { return s.exposed_tp_s; }},
        {"CP comm.", [](const sim::SimulationResult& s) { return s.exposed_cp_s; }},
        {"EP comm.", [](const sim::SimulationResult& s) { return s.exposed_ep_s; }},
        {"PP comm.", [](const sim::SimulationResult& s) { return s.exposed_pp_s; }},
        {"DP comm.", [](const sim::SimulationResult& s) { return s.exposed_dp_s; }},
        {"pipeline bubble", [](const sim::SimulationResult& s) { return s.time.pipeline_bubble_s; }},
        {"optimizer", [](const sim::SimulationResult& s) { return s.time.optimizer_s; }},
    };
    const int colors[] = {0, 1, 4, 6, 3, 5, 7, 2};
    int color = 0;
    for (const Part& p : parts) {
      BarSeries s{p.name, {}, palette[colors[color++]]};
      bool any = false;
      for (const ReportRow* r : rows) {
        const double share = 100.0 * p.seconds(*r->result) / r->result->step_time_s;
        s.values.push_back(share);
        any = any || share > 0.05;
      }
      if (any) c.series.push_back(std::move(s));
    }
    for (const ReportRow* r : rows) {
      c.categories.push_back(strong ? std::to_string(r->spec.gpus)
                                    : r->spec.label + "\n" + std::to_string(r->spec.gpus));
      c.top_labels.push_back(fixed(r->result->step_time_s, r->result->step_time_s < 10 ? 2 : 1) + " s");
    }
    plots.push_back({"breakdown.svg",
                     "Step time split into compute, communication that nothing hides, pipeline "
                     "bubble and optimizer; the label above each bar is the step time.",
                     render_bar_chart(c)});
  }

  // Predicted beside published/measured MFU, for the rows that have both.
  {
    BarChartSpec c;
    c.title = "MFU: predicted and " + ref;
    c.x_label = strong ? "GPUs" : "model and GPUs";
    c.y = {"MFU (%)", false, {}, std::nullopt, std::nullopt, true};
    BarSeries predicted{"predicted", {}, palette[0]};
    BarSeries published{ref, {}, palette[1]};
    for (const ReportRow* r : rows) {
      const std::optional<double> step = reference_step_time_s(*r);
      if (!step) continue;
      c.categories.push_back(strong ? std::to_string(r->spec.gpus)
                                    : r->spec.label + "\n" + std::to_string(r->spec.gpus));
      predicted.values.push_back(100.0 * r->result->mfu);
      published.values.push_back(100.0 * r->result->mfu * r->result->step_time_s / *step);
    }
    if (!c.categories.empty()) {
      c.series = {predicted, published};
      plots.push_back({"predicted_vs_" + std::string(ref == "measured" ? "measured" : "published") + ".svg",
                       "Predicted MFU beside the " + ref + " value of each row that has one.",
                       render_bar_chart(c)});
    }
  }
  return plots;
}

}  // namespace sextant::reports
