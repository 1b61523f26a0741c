#include "reports/scaling_report.h"

#include <algorithm>
#include <cmath>

#include "reports/html_page.h"
#include "reports/report_folder.h"
#include "reports/scaling_table.h"
#include "reports/validation_report.h"

namespace sextant::reports {

std::vector<std::string> scaling_summary(const std::vector<ReportRow>& rows, ScalingKind kind) {
  std::vector<std::string> lines;
  const long predicted = std::count_if(rows.begin(), rows.end(),
                                       [](const ReportRow& r) { return r.result.has_value(); });
  lines.push_back(std::to_string(predicted) + " of " + std::to_string(rows.size()) +
                  " rows predicted" +
                  (predicted < static_cast<long>(rows.size()) ? " (see the table for why not)." : "."));
  // MFU references: how many within 3 points.
  std::vector<double> mfu_errors, other_errors;
  for (const ReportRow& r : rows) {
    if (!r.reference_available()) continue;
    (r.spec.reference->metric == ReferenceMetric::kMfu ? mfu_errors : other_errors)
        .push_back(std::abs(reference_error(r)));
  }
  if (!mfu_errors.empty()) {
    const long within = std::count_if(mfu_errors.begin(), mfu_errors.end(),
                                      [](double e) { return e <= 3.0; });
    lines.push_back("MFU within 3 points of the reference in " + std::to_string(within) + " of " +
                    std::to_string(mfu_errors.size()) + " rows; median |error| " +
                    fixed(percentile(mfu_errors, 0.5), 1) + " pt, worst " +
                    fixed(*std::max_element(mfu_errors.begin(), mfu_errors.end()), 1) + " pt.");
  }
  if (!other_errors.empty()) {
    lines.push_back("Other references: median |error| " + fixed(percentile(other_errors, 0.5), 1) +
                    " %, worst " +
                    fixed(*std::max_element(other_errors.begin(), other_errors.end()), 1) + " %.");
  }
  const std::vector<double> efficiency = scaling_efficiency_percent(rows, kind);
  const ReportRow* largest = nullptr;
  double largest_efficiency = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].result && (!largest || rows[i].spec.gpus > largest->spec.gpus)) {
      largest = &rows[i];
      largest_efficiency = efficiency[i];
    }
  }
  if (largest && predicted > 1) {
    lines.push_back("Predicted scaling efficiency at " + std::to_string(largest->spec.gpus) +
                    " GPUs: " + fixed(largest_efficiency, 1) + " % of the smallest point's " +
                    (kind == ScalingKind::kStrong ? "tokens/s per GPU." : "model FLOP/s per GPU."));
  }
  long searched_rows = 0, evaluated = 0;
  for (const ReportRow& r : rows) {
    if (r.result && !r.searched.empty()) ++searched_rows;
    evaluated += r.evaluated_layouts;
  }
  if (searched_rows > 0) {
    lines.push_back("In " + std::to_string(searched_rows) +
                    " rows the search chose the knobs listed under 'chosen by search' (the "
                    "fastest layout that fits in memory; " + std::to_string(evaluated) +
                    " layouts considered in all).");
  }
  return lines;
}

namespace {

std::string markdown_report(const ScalingReportOptions& o, const std::vector<std::string>& summary,
                            const Table& table, const std::vector<NamedPlot>& plots,
                            const std::vector<std::string>& sources) {
  std::string md = "# " + o.title + "\n\n";
  if (!o.notes.empty()) md += o.notes + "\n\n";
  md += "Rows from " + o.source + "; predicted by the " + o.engine + ".\n\n";
  for (const std::string& line : summary) md += "- " + line + "\n";
  md += "\n" + to_markdown(table) + "\n";
  if (!sources.empty()) {
    md += "Sources (src):\n\n";
    for (std::size_t i = 0; i < sources.size(); ++i) {
      md += std::to_string(i + 1) + ". " + sources[i] + "\n";
    }
    md += "\n";
  }
  for (const NamedPlot& p : plots) md += "![" + p.caption + "](" + p.file + ")\n\n";
  return md;
}

}  // namespace

std::vector<std::string> write_scaling_report(const std::vector<ReportRow>& rows,
                                              const ScalingReportOptions& o,
                                              const std::string& folder) {
  prepare_report_folder(folder, "--out");
  const Table table = scaling_table(rows);
  const std::vector<NamedPlot> plots = scaling_plots(rows, o.kind);
  const std::vector<std::string> summary = scaling_summary(rows, o.kind);
  const std::vector<std::string> sources = reference_sources(rows);

  HtmlPage page(o.title);
  if (!o.notes.empty()) page.paragraph(o.notes);
  page.paragraph("Rows from " + o.source + "; predicted by the " + o.engine + ".");
  page.list(summary, false);
  page.heading("Table");
  page.table(to_html(table));
  if (!sources.empty()) {
    page.paragraph("Sources of the published/measured values (src column):");
    page.list(sources, true);
  }
  page.heading("Plots");
  for (const NamedPlot& p : plots) page.figure(p.svg, p.caption, p.file);

  std::vector<std::string> written = {"report.html", "report.md", "report.csv"};
  write_report_file(folder, "report.html", page.str());
  write_report_file(folder, "report.md", markdown_report(o, summary, table, plots, sources));
  write_report_file(folder, "report.csv", to_csv(table));
  for (const NamedPlot& p : plots) {
    write_report_file(folder, p.file, p.svg);
    written.push_back(p.file);
  }
  return written;
}

}  // namespace sextant::reports
