// One self-contained HTML page: its style sheet inline, plots inlined as SVG,
// no script and nothing fetched from the network. Readable on a phone (the
// table scrolls sideways inside its box, plots scale to the column) and in
// print (plots kept whole on a page, the table in a smaller font).
#pragma once

#include <string>
#include <vector>

namespace sextant::reports {

class HtmlPage {
 public:
  explicit HtmlPage(std::string title);

  void heading(const std::string& text);             // an <h2>
  void paragraph(const std::string& text);           // escaped
  void list(const std::vector<std::string>& items, bool numbered);  // escaped
  void table(const std::string& table_html);         // from to_html, in a scrolling box
  /// A figure of inline SVG (a whole document from SvgDocument) and its caption;
  /// `file` names the .svg beside the page for readers who want it alone.
  void figure(const std::string& svg, const std::string& caption, const std::string& file);

  std::string str() const;

 private:
  std::string title_;
  std::string body_;
  bool in_figures_ = false;
  void close_figures();
};

}  // namespace sextant::reports
