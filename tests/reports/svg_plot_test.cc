// The SVG writer, the axes and the two chart kinds (reports/svg_document.h,
// plot_axes.h, xy_chart.h, bar_chart.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "reports/bar_chart.h"
#include "reports/plot_axes.h"
#include "reports/svg_document.h"
#include "reports/xy_chart.h"

namespace sextant::reports {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgDocument, EscapesTextAndWritesTwoDecimals) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  EXPECT_EQ(svg_number(12.5), "12.5");
  EXPECT_EQ(svg_number(3.0), "3");
  EXPECT_EQ(svg_number(-0.001), "0");  // "-0.00" rounds to zero, written without a sign
  EXPECT_EQ(svg_number(1.0 / 3.0), "0.33");
  SvgDocument svg(100, 50, "T & U");
  svg.text(10, 20, "MFU < 50 %", TextAnchor::kEnd, "tick", -90);
  const std::string s = svg.str();
  EXPECT_NE(s.find("viewBox=\"0 0 100 50\""), std::string::npos);
  EXPECT_NE(s.find("<title>T &amp; U</title>"), std::string::npos);
  EXPECT_NE(s.find("text-anchor=\"end\" class=\"tick\" transform=\"rotate(-90 10 20)\">MFU &lt; 50 %</text>"),
            std::string::npos);
}

TEST(PlotAxes, NiceLinearTicks) {
  // MFU between 41 % and 49 %: range 8 → nice 10; step nice(10/5 = 2) = 2; ends 40 and 50.
  double low, high;
  std::vector<double> ticks;
  nice_linear_ticks(41, 49, 6, low, high, ticks);
  EXPECT_DOUBLE_EQ(low, 40);
  EXPECT_DOUBLE_EQ(high, 50);
  EXPECT_EQ(ticks, (std::vector<double>{40, 42, 44, 46, 48, 50}));
  // 0 to 0.87 s: nice range 1, step nice(0.2) = 0.2 → 0 ... 1.
  nice_linear_ticks(0, 0.87, 6, low, high, ticks);
  EXPECT_DOUBLE_EQ(high, 1.0);
  EXPECT_EQ(ticks.size(), 6u);
}

TEST(PlotAxes, LogTicksAndLabels) {
  // 40 to 7000 spans 2.2 decades: 1-2-5 steps inside, 50 ... 5000.
  EXPECT_EQ(log_ticks(40, 7000), (std::vector<double>{50, 100, 200, 500, 1000, 2000, 5000}));
  // 1e-5 to 1 spans 5 decades: powers of ten only.
  EXPECT_EQ(log_ticks(1e-5, 1).size(), 6u);
  EXPECT_EQ(tick_label(1536), "1536");
  EXPECT_EQ(tick_label(0.05), "0.05");
  EXPECT_EQ(tick_label(47.5), "47.5");
  EXPECT_EQ(tick_label(0.000012), "1.2e-05");
  // Log scale from 10 to 1000 over pixels 0 to 200: 100 sits halfway.
  EXPECT_DOUBLE_EQ(AxisScale(10, 1000, 0, 200, true).to_pixel(100), 100);
  // Linear y from 0 to 50 over pixels 300 (bottom) to 100 (top): 25 at 200.
  EXPECT_DOUBLE_EQ(AxisScale(0, 50, 300, 100, false).to_pixel(25), 200);
}

TEST(XyChart, DrawsSeriesLegendAndSkipsMissingPoints) {
  XyChartSpec c;
  c.title = "MFU against GPUs";
  c.x = {"GPUs", true, {96, 192, 384}, std::nullopt, std::nullopt, false};
  c.y.label = "MFU (%)";
  c.series.push_back({"predicted", {96, 192, 384}, {47, 46, 45}, SeriesStyle::kLineWithMarkers, "#0072B2"});
  c.series.push_back({"published", {96, 192, 384}, {47, NAN, 42}, SeriesStyle::kHollowMarkers, "#D55E00"});
  const std::string svg = render_xy_chart(c);
  // 3 filled markers of the prediction + 1 in the legend.
  EXPECT_EQ(count(svg, "<circle"), 4);
  // 2 published diamonds (the NaN is skipped) + 1 in the legend, each a polygon.
  EXPECT_EQ(count(svg, "<polygon"), 3);
  for (const char* label : {">96<", ">192<", ">384<", ">GPUs<", ">MFU (%)<", ">predicted<", ">published<"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
}

TEST(XyChart, LeavesOutTickLabelsThatWouldOverlap) {
  XyChartSpec c;
  c.title = "t";
  // 1000 and 1010 are 0.5 px apart on this log axis: the second label is dropped.
  c.x = {"GPUs", true, {10, 1000, 1010, 100000}, std::nullopt, std::nullopt, false};
  c.series.push_back({"s", {10, 1000, 1010, 100000}, {1, 2, 3, 4}, SeriesStyle::kMarkers, "#000"});
  const std::string svg = render_xy_chart(c);
  EXPECT_NE(svg.find(">1000<"), std::string::npos);
  EXPECT_EQ(svg.find(">1010<"), std::string::npos);
}

TEST(BarChart, StacksToTheTotalAndLabelsTheTop) {
  BarChartSpec c;
  c.title = "breakdown";
  c.categories = {"48", "96"};
  c.y = {"share (%)", false, {0, 50, 100}, 0.0, 100.0, true};
  c.stacked = true;
  c.series = {{"compute", {80, 60}, "#111"}, {"comm.", {20, 40}, "#222"}};
  c.top_labels = {"0.43 s", "0.81 s"};
  const std::string svg = render_bar_chart(c);
  // 4 bars + 2 legend boxes.
  EXPECT_EQ(count(svg, "<rect x="), 6);
  EXPECT_NE(svg.find(">0.81 s<"), std::string::npos);
  // "comm." is 2 bars and 1 legend box.
  EXPECT_EQ(count(svg, "fill=\"#222\""), 3);
}

}  // namespace
}  // namespace sextant::reports
