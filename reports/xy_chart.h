// Line and scatter charts: series of (x, y) points as lines with markers,
// markers alone, or dashed reference lines, plus shaded bands (a tolerance).
#pragma once

#include <string>
#include <vector>

#include "reports/chart_frame.h"

namespace sextant::reports {

enum class SeriesStyle {
  kLineWithMarkers,  // what the simulator predicts
  kHollowMarkers,    // published or measured points
  kDashedLine,       // a reference: ideal scaling, y = x
  kMarkers,          // a scatter of many points
};

struct XySeries {
  std::string name;
  std::vector<double> x, y;  // same length; points with a non-finite y are skipped
  SeriesStyle style = SeriesStyle::kLineWithMarkers;
  std::string color;
};

/// The region between y_low and y_high along x (a ±5 % band).
struct XyBand {
  std::string name;
  std::vector<double> x, y_low, y_high;
  std::string color;
};

struct XyChartSpec {
  std::string title;
  AxisOptions x, y;
  std::vector<XyBand> bands;     // drawn first, under the series
  std::vector<XySeries> series;  // drawn in order; the legend lists bands then series
};

/// The chart as a standalone SVG document.
std::string render_xy_chart(const XyChartSpec& spec);

}  // namespace sextant::reports
