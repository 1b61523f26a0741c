#include "reports/svg_document.h"

#include <cmath>
#include <cstdio>

namespace sextant::reports {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_number(double value) {
  if (!std::isfinite(value)) value = 0;
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string s = buffer;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

namespace {
std::string attribute(std::string_view name, std::string_view value) {
  if (value.empty()) return "";
  return " " + std::string(name) + "=\"" + xml_escape(value) + "\"";
}

std::string points(const std::vector<double>& xy) {
  std::string out;
  for (std::size_t i = 0; i + 1 < xy.size(); i += 2) {
    if (i > 0) out += ' ';
    out += svg_number(xy[i]) + "," + svg_number(xy[i + 1]);
  }
  return out;
}
}  // namespace

SvgDocument::SvgDocument(double width_px, double height_px, std::string_view title)
    : width_(width_px), height_(height_px), title_(title) {}

void SvgDocument::line(double x1, double y1, double x2, double y2, std::string_view css_class) {
  body_ += "<line x1=\"" + svg_number(x1) + "\" y1=\"" + svg_number(y1) + "\" x2=\"" +
           svg_number(x2) + "\" y2=\"" + svg_number(y2) + "\"" + attribute("class", css_class) +
           "/>\n";
}

void SvgDocument::rect(double x, double y, double width, double height,
                       std::string_view css_class, std::string_view fill) {
  body_ += "<rect x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" width=\"" +
           svg_number(width) + "\" height=\"" + svg_number(height) + "\"" +
           attribute("class", css_class) + attribute("fill", fill) + "/>\n";
}

void SvgDocument::circle(double cx, double cy, double r, std::string_view css_class,
                         std::string_view fill) {
  body_ += "<circle cx=\"" + svg_number(cx) + "\" cy=\"" + svg_number(cy) + "\" r=\"" +
           svg_number(r) + "\"" + attribute("class", css_class) + attribute("fill", fill) +
           "/>\n";
}

void SvgDocument::polyline(const std::vector<double>& xy, std::string_view css_class,
                           std::string_view stroke) {
  body_ += "<polyline points=\"" + points(xy) + "\"" + attribute("class", css_class) +
           attribute("stroke", stroke) + "/>\n";
}

void SvgDocument::polygon(const std::vector<double>& xy, std::string_view css_class,
                          std::string_view fill) {
  body_ += "<polygon points=\"" + points(xy) + "\"" + attribute("class", css_class) +
           attribute("fill", fill) + "/>\n";
}

void SvgDocument::text(double x, double y, std::string_view text, TextAnchor anchor,
                       std::string_view css_class, double rotate_deg) {
  const char* anchor_name =
      anchor == TextAnchor::kStart ? "start" : anchor == TextAnchor::kMiddle ? "middle" : "end";
  std::string transform;
  if (rotate_deg != 0) {
    transform = " transform=\"rotate(" + svg_number(rotate_deg) + " " + svg_number(x) + " " +
                svg_number(y) + ")\"";
  }
  body_ += "<text x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" text-anchor=\"" +
           anchor_name + "\"" + attribute("class", css_class) + transform + ">" +
           xml_escape(text) + "</text>\n";
}

std::string SvgDocument::str() const {
  // The style sheet makes a standalone .svg look like its copy inside the HTML page;
  // the page's own rules (same class names) take over there.
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + svg_number(width_) + " " +
         svg_number(height_) + "\" role=\"img\" aria-label=\"" + xml_escape(title_) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n"
         "<title>" + xml_escape(title_) + "</title>\n"
         "<style>text{font-size:14px;fill:#222}.title{font-size:16px;font-weight:bold}"
         ".axis{stroke:#444;stroke-width:1}.grid{stroke:#ddd;stroke-width:1}"
         ".tick{font-size:13px}.series{fill:none;stroke-width:2}"
         ".dashed{fill:none;stroke-width:1.5;stroke-dasharray:6 4}"
         ".band{opacity:0.18}.bar{stroke:#fff;stroke-width:0.5}.marker{stroke:#fff;stroke-width:1}"
         ".hollow{fill:#fff;stroke-width:2}.label{font-size:12px}</style>\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n" +
         body_ + "</svg>\n";
}

}  // namespace sextant::reports
