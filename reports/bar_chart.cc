#include "reports/bar_chart.h"

#include <algorithm>
#include <cmath>

#include "reports/plot_axes.h"

namespace sextant::reports {

std::string render_bar_chart(const BarChartSpec& spec) {
  SvgDocument svg(kChartWidth, kChartHeight, spec.title);
  std::vector<LegendEntry> legend;
  for (const BarSeries& s : spec.series) legend.push_back({s.name, s.color, LegendSymbol::kBox});
  const double top = draw_title_and_legend(svg, spec.title, legend) +
                     (spec.top_labels.empty() ? 8 : 22);
  constexpr double kLeft = 66, kRight = 16;
  const double right = kChartWidth - kRight;
  const std::size_t n = spec.categories.size();
  const double slot = (right - kLeft) / static_cast<double>(std::max<std::size_t>(n, 1));
  const double group_width = slot * 0.72;
  const std::size_t bars_per_group = spec.stacked ? 1 : std::max<std::size_t>(spec.series.size(), 1);
  const double bar_width = group_width / static_cast<double>(bars_per_group);
  // Category labels turn 40° when the widest line would not fit its slot; the
  // space below the axis grows with them (sin 40° ≈ 0.64 of their length).
  // A turned label is written on one line (its '\n' becomes a space).
  double widest_line = 0, widest_flat = 0;
  for (const std::string& c : spec.categories) {
    std::size_t start = 0;
    while (start <= c.size()) {
      const std::size_t end = std::min(c.find('\n', start), c.size());
      widest_line = std::max(widest_line, estimated_text_width_px(c.substr(start, end - start), 13));
      start = end + 1;
    }
    widest_flat = std::max(widest_flat, estimated_text_width_px(c, 13));
  }
  const bool rotate = widest_line > slot - 4;
  const double below_axis = rotate ? std::max(70.0, 0.64 * widest_flat + 44) : 70.0;
  const double bottom = kChartHeight - below_axis;

  // Range over what is drawn: each bar, or each category's stack.
  double data_low = 0, data_high = 0;
  for (std::size_t c = 0; c < n; ++c) {
    double positive = 0, negative = 0;
    for (const BarSeries& s : spec.series) {
      const double v = c < s.values.size() ? s.values[c] : NAN;
      if (!std::isfinite(v)) continue;
      if (spec.stacked) (v >= 0 ? positive : negative) += v;
      else data_low = std::min(data_low, v), data_high = std::max(data_high, v);
    }
    data_low = std::min(data_low, negative);
    data_high = std::max(data_high, positive);
  }
  if (spec.y.max) data_high = std::max(data_high, *spec.y.max);
  double y_low, y_high;
  std::vector<double> ticks;
  nice_linear_ticks(data_low, data_high, 6, y_low, y_high, ticks);
  if (spec.y.max) y_high = *spec.y.max;
  if (spec.y.min) y_low = *spec.y.min;
  if (!spec.y.ticks.empty()) ticks = spec.y.ticks;
  const AxisScale ys(y_low, y_high, bottom, top, false);

  for (double t : ticks) {
    if (t < y_low - 1e-12 || t > y_high + 1e-12) continue;
    const double py = ys.to_pixel(t);
    svg.line(kLeft, py, right, py, "grid");
    svg.text(kLeft - 6, py + 4, tick_label(t), TextAnchor::kEnd, "tick");
  }

  const double zero_px = ys.to_pixel(std::clamp(0.0, y_low, y_high));
  for (std::size_t c = 0; c < n; ++c) {
    const double group_left = kLeft + slot * static_cast<double>(c) + (slot - group_width) / 2;
    double positive = 0, negative = 0, bar_top = zero_px;
    for (std::size_t s = 0; s < spec.series.size(); ++s) {
      const BarSeries& series = spec.series[s];
      const double v = c < series.values.size() ? series.values[c] : NAN;
      if (!std::isfinite(v)) continue;
      double base = 0, x = group_left + bar_width * static_cast<double>(s);
      if (spec.stacked) {
        x = group_left;
        double& running = v >= 0 ? positive : negative;
        base = running;
        running += v;
      }
      const double p0 = ys.to_pixel(base), p1 = ys.to_pixel(base + v);
      svg.rect(x, std::min(p0, p1), bar_width, std::abs(p1 - p0), "bar", series.color);
      bar_top = std::min(bar_top, std::min(p0, p1));
    }
    const double centre = group_left + group_width / 2;
    if (c < spec.top_labels.size() && !spec.top_labels[c].empty()) {
      svg.text(centre, bar_top - 5, spec.top_labels[c], TextAnchor::kMiddle, "label");
    }
    const std::string& label = spec.categories[c];
    const std::size_t split = label.find('\n');
    if (rotate) {
      std::string flat = label;
      std::replace(flat.begin(), flat.end(), '\n', ' ');
      svg.text(centre + 4, bottom + 14, flat, TextAnchor::kEnd, "tick", -40);
    } else {
      svg.text(centre, bottom + 18, label.substr(0, split), TextAnchor::kMiddle, "tick");
      if (split != std::string::npos) {
        svg.text(centre, bottom + 33, label.substr(split + 1), TextAnchor::kMiddle, "tick");
      }
    }
  }
  svg.line(kLeft, zero_px, right, zero_px, "axis");
  svg.line(kLeft, top, kLeft, bottom, "axis");
  svg.text((kLeft + right) / 2, kChartHeight - 10, spec.x_label, TextAnchor::kMiddle, "");
  svg.text(18, (top + bottom) / 2, spec.y.label, TextAnchor::kMiddle, "", -90);
  return svg.str();
}

}  // namespace sextant::reports
