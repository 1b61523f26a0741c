// A small SVG writer: elements appended in order to one <svg> document.
//
// Why our own and not a Debian library: the plotting libraries Debian packages
// for C++ either drive an external program (gnuplot-iostream, sciplot: output
// changes with the gnuplot version, and a runtime binary to install) or draw
// through a device layer with process-wide state (PLplot, GNU plotutils) whose
// SVG has no classes for CSS and whose text depends on the fonts installed.
// The reports need byte-identical output on every machine (the committed
// examples are regenerated and compared by a test) and SVG that an HTML page
// can inline and style, which a few hundred lines of our own give.
//
// Coordinates are user units of the viewBox; numbers are written with two
// decimals so the text never depends on the last bits of a double.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sextant::reports {

/// Escapes &, <, >, " and ' for XML text and attribute values.
std::string xml_escape(std::string_view text);

/// `value` with two decimals, trailing zeros dropped ("12.5", "3", "-0.25").
std::string svg_number(double value);

enum class TextAnchor { kStart, kMiddle, kEnd };

class SvgDocument {
 public:
  /// A document `width_px` × `height_px` user units; `title` is its accessible name.
  SvgDocument(double width_px, double height_px, std::string_view title);

  void line(double x1, double y1, double x2, double y2, std::string_view css_class);
  void rect(double x, double y, double width, double height, std::string_view css_class,
            std::string_view fill = "");
  void circle(double cx, double cy, double r, std::string_view css_class,
              std::string_view fill = "");
  /// Open polyline through the points (x0, y0, x1, y1, ...).
  void polyline(const std::vector<double>& xy, std::string_view css_class,
                std::string_view stroke = "");
  /// Closed polygon through the points.
  void polygon(const std::vector<double>& xy, std::string_view css_class,
               std::string_view fill = "");
  /// `text` escaped; `rotate_deg` turns it about its anchor point.
  void text(double x, double y, std::string_view text, TextAnchor anchor,
            std::string_view css_class, double rotate_deg = 0);

  double width() const { return width_; }
  double height() const { return height_; }

  /// The whole document, with an embedded style sheet so the file stands alone.
  std::string str() const;

 private:
  double width_, height_;
  std::string title_;
  std::string body_;
};

}  // namespace sextant::reports
