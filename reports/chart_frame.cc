#include "reports/chart_frame.h"

#include "reports/plot_axes.h"

namespace sextant::reports {

const std::vector<std::string>& chart_palette() {
  static const std::vector<std::string> palette = {"#0072B2", "#D55E00", "#009E73", "#E69F00",
                                                   "#CC79A7", "#56B4E9", "#F0E442", "#000000"};
  return palette;
}

void draw_marker(SvgDocument& svg, double x, double y, const std::string& color, bool hollow) {
  if (hollow) {
    svg.polygon({x, y - 6, x + 6, y, x, y + 6, x - 6, y}, "hollow", "#fff");
    // the stroke colour comes from a polyline over the same outline (class "series")
    svg.polyline({x, y - 6, x + 6, y, x, y + 6, x - 6, y, x, y - 6}, "series", color);
  } else {
    svg.circle(x, y, 4.5, "marker", color);
  }
}

double draw_title_and_legend(SvgDocument& svg, const std::string& title,
                             const std::vector<LegendEntry>& legend) {
  svg.text(svg.width() / 2, 22, title, TextAnchor::kMiddle, "title");
  constexpr double kRowHeight = 20, kSymbolWidth = 24, kGap = 14, kFontPx = 14, kMargin = 12;
  double x = kMargin, y = 44;
  for (const LegendEntry& e : legend) {
    const double width = kSymbolWidth + 6 + estimated_text_width_px(e.name, kFontPx);
    if (x > kMargin && x + width > svg.width() - kMargin) {
      x = kMargin;
      y += kRowHeight;
    }
    const double cy = y - 4.5;
    switch (e.symbol) {
      case LegendSymbol::kLineWithMarker:
        svg.polyline({x, cy, x + kSymbolWidth, cy}, "series", e.color);
        draw_marker(svg, x + kSymbolWidth / 2, cy, e.color, false);
        break;
      case LegendSymbol::kMarker: draw_marker(svg, x + kSymbolWidth / 2, cy, e.color, false); break;
      case LegendSymbol::kHollowMarker:
        draw_marker(svg, x + kSymbolWidth / 2, cy, e.color, true);
        break;
      case LegendSymbol::kDashedLine:
        svg.polyline({x, cy, x + kSymbolWidth, cy}, "dashed", e.color);
        break;
      case LegendSymbol::kBox: svg.rect(x + 6, cy - 6, 14, 12, "bar", e.color); break;
      case LegendSymbol::kBand: svg.rect(x, cy - 6, kSymbolWidth, 12, "band", e.color); break;
    }
    svg.text(x + kSymbolWidth + 6, y, e.name, TextAnchor::kStart, "");
    x += width + kGap;
  }
  return legend.empty() ? 44 : y + 14;
}

}  // namespace sextant::reports
