// Bar charts over named categories: grouped (series side by side, e.g.
// predicted beside published) or stacked (parts of a whole, e.g. where the
// step time goes).
#pragma once

#include <string>
#include <vector>

#include "reports/chart_frame.h"

namespace sextant::reports {

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; NaN: no bar
  std::string color;
};

struct BarChartSpec {
  std::string title;
  std::vector<std::string> categories;  // '\n' splits a label over two lines
  std::string x_label;
  AxisOptions y;                        // linear; bars start at zero
  std::vector<BarSeries> series;
  bool stacked = false;
  std::vector<std::string> top_labels;  // optional text above each category's bar(s)
};

/// The chart as a standalone SVG document.
std::string render_bar_chart(const BarChartSpec& spec);

}  // namespace sextant::reports
