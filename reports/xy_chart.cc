#include "reports/xy_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reports/plot_axes.h"

namespace sextant::reports {

namespace {

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v, bool log) {
    if (!std::isfinite(v) || (log && v <= 0)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  bool empty() const { return !(high >= low); }
};

// The axis range and its ticks: forced ends, data, zero when asked, then nice
// boundaries (linear) or 10 % of margin (log).
void resolve_axis(const AxisOptions& axis, Range data, double& low, double& high,
                  std::vector<double>& ticks) {
  if (data.empty()) data = {1, 10};
  if (axis.include_zero && !axis.log) data.add(0, false);
  if (axis.min) data.low = *axis.min;
  if (axis.max) data.high = *axis.max;
  if (axis.log) {
    if (data.high <= data.low) data.high = data.low * 10;
    low = axis.min ? *axis.min : data.low / 1.15;
    high = axis.max ? *axis.max : data.high * 1.15;
    ticks = axis.ticks.empty() ? log_ticks(low, high) : axis.ticks;
    if (ticks.size() < 2 && axis.ticks.empty()) ticks = {low, high};
  } else {
    nice_linear_ticks(data.low, data.high, 6, low, high, ticks);
    if (axis.min) low = *axis.min;
    if (axis.max) high = *axis.max;
    if (!axis.ticks.empty()) ticks = axis.ticks;
  }
}

LegendSymbol symbol_for(SeriesStyle style) {
  switch (style) {
    case SeriesStyle::kLineWithMarkers: return LegendSymbol::kLineWithMarker;
    case SeriesStyle::kHollowMarkers: return LegendSymbol::kHollowMarker;
    case SeriesStyle::kDashedLine: return LegendSymbol::kDashedLine;
    case SeriesStyle::kMarkers: return LegendSymbol::kMarker;
  }
  return LegendSymbol::kMarker;
}

}  // namespace

std::string render_xy_chart(const XyChartSpec& spec) {
  SvgDocument svg(kChartWidth, kChartHeight, spec.title);
  std::vector<LegendEntry> legend;
  Range xr, yr;
  for (const XyBand& b : spec.bands) {
    legend.push_back({b.name, b.color, LegendSymbol::kBand});
    for (std::size_t i = 0; i < b.x.size(); ++i) {
      xr.add(b.x[i], spec.x.log);
      yr.add(b.y_low[i], spec.y.log);
      yr.add(b.y_high[i], spec.y.log);
    }
  }
  for (const XySeries& s : spec.series) {
    legend.push_back({s.name, s.color, symbol_for(s.style)});
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      xr.add(s.x[i], spec.x.log);
      yr.add(s.y[i], spec.y.log);
    }
  }
  const double top = draw_title_and_legend(svg, spec.title, legend) + 8;
  constexpr double kLeft = 66, kRight = 16, kBottom = 56;
  const double bottom = kChartHeight - kBottom, right = kChartWidth - kRight;

  double x_low, x_high, y_low, y_high;
  std::vector<double> x_ticks, y_ticks;
  resolve_axis(spec.x, xr, x_low, x_high, x_ticks);
  resolve_axis(spec.y, yr, y_low, y_high, y_ticks);
  const AxisScale xs(x_low, x_high, kLeft, right, spec.x.log);
  const AxisScale ys(y_low, y_high, bottom, top, spec.y.log);

  // Grid and tick labels; an x label that would touch the previous one is left out.
  double last_label_end = -1e9;
  for (double t : x_ticks) {
    if (t < x_low || t > x_high) continue;
    const double px = xs.to_pixel(t);
    svg.line(px, top, px, bottom, "grid");
    const std::string label = tick_label(t);
    const double half = estimated_text_width_px(label, 13) / 2;
    if (px - half < last_label_end + 4) continue;
    svg.text(px, bottom + 18, label, TextAnchor::kMiddle, "tick");
    last_label_end = px + half;
  }
  for (double t : y_ticks) {
    if (t < y_low || t > y_high) continue;
    const double py = ys.to_pixel(t);
    svg.line(kLeft, py, right, py, "grid");
    svg.text(kLeft - 6, py + 4, tick_label(t), TextAnchor::kEnd, "tick");
  }
  svg.line(kLeft, bottom, right, bottom, "axis");
  svg.line(kLeft, top, kLeft, bottom, "axis");
  svg.text((kLeft + right) / 2, bottom + 44, spec.x.label, TextAnchor::kMiddle, "");
  svg.text(18, (top + bottom) / 2, spec.y.label, TextAnchor::kMiddle, "", -90);

  auto clamp_y = [&](double v) {
    return std::clamp(ys.to_pixel(v), std::min(top, bottom), std::max(top, bottom));
  };
  for (const XyBand& b : spec.bands) {
    std::vector<double> outline;
    for (std::size_t i = 0; i < b.x.size(); ++i) {
      outline.push_back(xs.to_pixel(b.x[i]));
      outline.push_back(clamp_y(b.y_high[i]));
    }
    for (std::size_t i = b.x.size(); i-- > 0;) {
      outline.push_back(xs.to_pixel(b.x[i]));
      outline.push_back(clamp_y(b.y_low[i]));
    }
    svg.polygon(outline, "band", b.color);
  }
  for (const XySeries& s : spec.series) {
    std::vector<double> xy;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (spec.y.log && s.y[i] <= 0)) continue;
      xy.push_back(xs.to_pixel(s.x[i]));
      xy.push_back(clamp_y(s.y[i]));
    }
    if (s.style == SeriesStyle::kLineWithMarkers && xy.size() >= 4) {
      svg.polyline(xy, "series", s.color);
    }
    if (s.style == SeriesStyle::kDashedLine) {
      svg.polyline(xy, "dashed", s.color);
      continue;
    }
    for (std::size_t i = 0; i + 1 < xy.size(); i += 2) {
      draw_marker(svg, xy[i], xy[i + 1], s.color, s.style == SeriesStyle::kHollowMarkers);
    }
  }
  return svg.str();
}

}  // namespace sextant::reports
