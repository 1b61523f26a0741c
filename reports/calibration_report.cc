#include "reports/calibration_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "reports/bar_chart.h"
#include "reports/html_page.h"
#include "reports/report_folder.h"
#include "reports/report_table.h"
#include "reports/scaling_table.h"
#include "reports/validation_report.h"
#include "reports/xy_chart.h"
#include "sim/core/config_error.h"

namespace sextant::reports {

namespace {

constexpr double kBand = 0.05;  // the ±5 % band of the scatter

bool parse_number(const std::string& text, double& value) {
  try {
    std::size_t used = 0;
    value = std::stod(text, &used);
    return used == text.size() && std::isfinite(value);
  } catch (const std::exception&) {
    return false;
  }
}

struct KindSummary {
  std::string kind;
  int count = 0;
  double predicted_s = 0, measured_s = 0;
  std::vector<double> errors;  // relative, signed
};

std::vector<KindSummary> by_kind(const std::vector<CalibrationPoint>& points) {
  std::vector<KindSummary> kinds;
  for (const CalibrationPoint& p : points) {
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const KindSummary& k) { return k.kind == p.task_kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), KindSummary{p.task_kind, 0, 0, 0, {}});
    ++it->count;
    it->predicted_s += p.predicted_s;
    it->measured_s += p.measured_s;
    it->errors.push_back(p.error);
  }
  return kinds;
}

std::string signed_percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + fixed(100 * fraction, 1);
}

std::vector<double> absolute(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}

Table kind_table(const std::vector<KindSummary>& kinds) {
  Table t;
  t.add_column("task kind", false);
  for (const char* h : {"tasks", "predicted total (s)", "measured total (s)", "total error (%)",
                        "median error (%)", "median |error| (%)", "worst |error| (%)",
                        "within ±5 %"}) {
    t.add_column(h, true);
  }
  for (const KindSummary& k : kinds) {
    const std::vector<double> abs_errors = absolute(k.errors);
    const long within = std::count_if(abs_errors.begin(), abs_errors.end(),
                                      [](double e) { return e <= kBand + 1e-12; });
    t.rows.push_back({k.kind, std::to_string(k.count), fixed(k.predicted_s, 6),
                      fixed(k.measured_s, 6), signed_percent((k.predicted_s - k.measured_s) / k.measured_s),
                      signed_percent(percentile(k.errors, 0.5)),
                      fixed(100 * percentile(abs_errors, 0.5), 1),
                      fixed(100 * *std::max_element(abs_errors.begin(), abs_errors.end()), 1),
                      std::to_string(within) + " of " + std::to_string(k.count)});
  }
  return t;
}

Table point_table(const std::vector<CalibrationPoint>& points) {
  Table t;
  t.add_column("layout", false);
  t.add_column("task_kind", false);
  t.add_column("predicted_s", true);
  t.add_column("measured_s", true);
  t.add_column("error", true);
  for (const CalibrationPoint& p : points) {
    char error[32];
    std::snprintf(error, sizeof error, "%.4f", p.error);
    t.rows.push_back({p.layout, p.task_kind, fixed(p.predicted_s, 9), fixed(p.measured_s, 9), error});
  }
  return t;
}

std::string scatter_svg(const std::vector<CalibrationPoint>& points,
                        const std::vector<KindSummary>& kinds) {
  XyChartSpec c;
  c.title = "Predicted against measured time per task";
  c.x = {"measured time (s, log scale)", true, {}, std::nullopt, std::nullopt, false};
  c.y = {"predicted time (s, log scale)", true, {}, std::nullopt, std::nullopt, false};
  double low = 1e300, high = 0;
  for (const CalibrationPoint& p : points) {
    for (double v : {p.predicted_s, p.measured_s}) {
      if (v > 0) low = std::min(low, v), high = std::max(high, v);
    }
  }
  if (high <= 0) low = 1e-6, high = 1;
  // Same range on both axes so y = x is the diagonal.
  const double lo = low / 1.3, hi = high * 1.3;
  c.x.min = c.y.min = lo;
  c.x.max = c.y.max = hi;
  const std::vector<std::string>& palette = chart_palette();
  c.bands.push_back({"±5 %", {lo, hi}, {lo * (1 - kBand), hi * (1 - kBand)},
                     {lo * (1 + kBand), hi * (1 + kBand)}, palette[2]});
  c.series.push_back({"y = x", {lo, hi}, {lo, hi}, SeriesStyle::kDashedLine, palette[7]});
  // Every palette colour but the band's green, yellow last (least contrast on
  // white); past seven kinds the colours repeat with hollow markers.
  const int order[] = {0, 1, 3, 4, 5, 7, 6};
  std::size_t index = 0;
  for (const KindSummary& k : kinds) {
    XySeries s{k.kind, {}, {}, index < 7 ? SeriesStyle::kMarkers : SeriesStyle::kHollowMarkers,
               palette[order[index % 7]]};
    ++index;
    for (const CalibrationPoint& p : points) {
      if (p.task_kind != k.kind || p.measured_s <= 0 || p.predicted_s <= 0) continue;
      s.x.push_back(p.measured_s);
      s.y.push_back(p.predicted_s);
    }
    c.series.push_back(std::move(s));
  }
  return render_xy_chart(c);
}

std::string kinds_svg(const std::vector<KindSummary>& kinds) {
  BarChartSpec c;
  c.title = "Error of the prediction per task kind";
  c.x_label = "task kind";
  c.y = {"error (%): predicted − measured", false, {}, std::nullopt, std::nullopt, true};
  const std::vector<std::string>& palette = chart_palette();
  BarSeries total{"error of the total time", {}, palette[0]};
  BarSeries median{"median error per task", {}, palette[3]};
  for (const KindSummary& k : kinds) {
    c.categories.push_back(k.kind);
    total.values.push_back(100 * (k.predicted_s - k.measured_s) / k.measured_s);
    median.values.push_back(100 * percentile(k.errors, 0.5));
  }
  c.series = {total, median};
  return render_bar_chart(c);
}

}  // namespace

std::vector<CalibrationPoint> load_calibration_points(const std::string& runs_folder) {
  const std::string path = runs_folder + "/compare.csv";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw sim::ConfigError({{path, 0, 0, "",
                             "cannot open (--runs names a folder that `sextant run --compare "
                             "--report DIR` wrote)"}});
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::vector<std::string>> records;
  try {
    records = parse_csv(text.str());
  } catch (const std::invalid_argument& e) {
    throw sim::ConfigError({{path, 0, 0, "", e.what()}});
  }
  const std::vector<std::string> expected = {"layout", "task_kind", "predicted_s", "measured_s",
                                             "error"};
  if (records.empty() || records[0] != expected) {
    throw sim::ConfigError({{path, 1, 1, "",
                             "the header must be exactly: layout,task_kind,predicted_s,"
                             "measured_s,error"}});
  }
  std::vector<sim::Diagnostic> diags;
  std::vector<CalibrationPoint> points;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const std::vector<std::string>& r = records[i];
    const int line = static_cast<int>(i) + 1;  // records span one line each in this format
    if (r.size() != expected.size()) {
      diags.push_back({path, line, 1, "", "expected 5 fields, got " + std::to_string(r.size())});
      continue;
    }
    CalibrationPoint p{r[0], r[1]};
    double file_error = 0;
    if (!parse_number(r[2], p.predicted_s) || p.predicted_s < 0) {
      diags.push_back({path, line, 0, "predicted_s", "expected a number of seconds >= 0, got '" + r[2] + "'"});
    }
    if (!parse_number(r[3], p.measured_s) || p.measured_s <= 0) {
      diags.push_back({path, line, 0, "measured_s", "expected a number of seconds > 0, got '" + r[3] + "'"});
    }
    if (!parse_number(r[4], file_error)) {
      diags.push_back({path, line, 0, "error", "expected a number, got '" + r[4] + "'"});
    }
    if (p.task_kind.empty()) diags.push_back({path, line, 0, "task_kind", "must not be empty"});
    if (p.measured_s > 0) p.error = (p.predicted_s - p.measured_s) / p.measured_s;
    points.push_back(p);
  }
  if (points.empty() && diags.empty()) {
    diags.push_back({path, 0, 0, "", "no comparisons after the header"});
  }
  sim::throw_if_any(std::move(diags));
  return points;
}

std::vector<std::string> write_calibration_report(const std::vector<CalibrationPoint>& points,
                                                  const CalibrationReportOptions& o,
                                                  const std::string& folder) {
  prepare_report_folder(folder, "--out");
  const std::vector<KindSummary> kinds = by_kind(points);
  std::vector<double> abs_errors;
  for (const CalibrationPoint& p : points) abs_errors.push_back(std::abs(p.error));
  const long within = std::count_if(abs_errors.begin(), abs_errors.end(),
                                    [](double e) { return e <= kBand + 1e-12; });
  std::vector<std::string> summary = {
      std::to_string(points.size()) + " tasks of " + std::to_string(kinds.size()) +
          " kinds compared; " + std::to_string(within) + " predicted within ±5 % of the measurement.",
      "|error|: median " + fixed(100 * percentile(abs_errors, 0.5), 1) + " %, p90 " +
          fixed(100 * percentile(abs_errors, 0.9), 1) + " %, worst " +
          fixed(100 * *std::max_element(abs_errors.begin(), abs_errors.end()), 1) +
          " % (error = (predicted − measured) / measured)."};
  const Table kinds_table = kind_table(kinds);
  const Table points_table = point_table(points);
  const std::string scatter = scatter_svg(points, kinds);
  const std::string bars = kinds_svg(kinds);

  HtmlPage page(o.title);
  page.paragraph("Comparisons from " + o.source + ".");
  page.list(summary, false);
  page.heading("Plots");
  page.figure(scatter, "Each task's predicted time against its measured time; the dashed line is "
                       "a perfect prediction, the band ±5 %.", "scatter.svg");
  page.figure(bars, "Signed error per task kind: of the summed time, and the median of the tasks.",
              "task_kinds.svg");
  page.heading("Per task kind");
  page.table(to_html(kinds_table));
  page.heading("Every task");
  page.table(to_html(points_table));

  std::string md = "# " + o.title + "\n\nComparisons from " + o.source + ".\n\n";
  for (const std::string& line : summary) md += "- " + line + "\n";
  md += "\n" + to_markdown(kinds_table) + "\nEvery task: report.csv.\n\n" +
        "![predicted against measured](scatter.svg)\n\n![error per task kind](task_kinds.svg)\n";

  write_report_file(folder, "report.html", page.str());
  write_report_file(folder, "report.md", md);
  write_report_file(folder, "report.csv", to_csv(points_table));
  write_report_file(folder, "scatter.svg", scatter);
  write_report_file(folder, "task_kinds.svg", bars);
  return {"report.html", "report.md", "report.csv", "scatter.svg", "task_kinds.svg"};
}

}  // namespace sextant::reports
