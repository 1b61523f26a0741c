// What every report chart shares: the palette, the title, the legend above the
// plot area (so it never covers data) and the axis options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/svg_document.h"

namespace sextant::reports {

/// Okabe and Ito's colour-blind-safe palette ("Color Universal Design", 2008),
/// black last.
const std::vector<std::string>& chart_palette();

struct AxisOptions {
  std::string label;               // with its unit, e.g. "GPUs" or "MFU (%)"
  bool log = false;
  std::vector<double> ticks;       // empty: chosen automatically
  std::optional<double> min, max;  // forced ends of the range
  bool include_zero = false;       // linear axes: start at zero
};

enum class LegendSymbol { kLineWithMarker, kMarker, kHollowMarker, kDashedLine, kBox, kBand };

struct LegendEntry {
  std::string name;
  std::string color;
  LegendSymbol symbol;
};

/// Chart size in user units; the HTML page scales it to its column. Small, so
/// that the 13-14 px text stays legible when a phone shows it ~360 px wide.
inline constexpr double kChartWidth = 560;
inline constexpr double kChartHeight = 390;

/// Draws the title and the legend rows (wrapped to the width); returns the y
/// where the plot area may begin.
double draw_title_and_legend(SvgDocument& svg, const std::string& title,
                             const std::vector<LegendEntry>& legend);

/// Marker for a series point (filled disc or hollow ring).
void draw_marker(SvgDocument& svg, double x, double y, const std::string& color, bool hollow);

}  // namespace sextant::reports
