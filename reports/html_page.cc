#include "reports/html_page.h"

#include <cctype>

#include "reports/svg_document.h"

namespace sextant::reports {

namespace {
// Class names are prefixed "page-" so they never meet the SVGs' own rules
// (an inline SVG's <style> applies to the whole page).
const char* const kStyle = R"(
:root{color-scheme:light}
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
  color:#1b1b1b;background:#fff;line-height:1.45}
main{max-width:1400px;margin:0 auto;padding:16px}
h1{font-size:1.5rem;margin:0.4em 0}
h2{font-size:1.15rem;margin:1.4em 0 0.5em;border-bottom:1px solid #ddd;padding-bottom:0.2em}
p,li{font-size:0.95rem;max-width:70em}
.page-scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;border:1px solid #ddd}
table{border-collapse:collapse;font-size:0.78rem;font-variant-numeric:tabular-nums}
th,td{padding:3px 6px;border-bottom:1px solid #eee;white-space:nowrap;text-align:left}
th{background:#f4f6f8;position:sticky;top:0}
td.num,th.num{text-align:right}
/* The first column (the model) stays in view while the table scrolls sideways. */
th:first-child,td:first-child{position:sticky;left:0;background:#fff;z-index:1}
th:first-child{background:#f4f6f8;z-index:2}
tbody tr:nth-child(even){background:#fafbfc}
.page-figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,480px),1fr));gap:18px}
figure{margin:0;border:1px solid #e3e3e3;padding:8px}
figure svg{width:100%;height:auto;display:block}
figcaption{font-size:0.85rem;color:#444;margin-top:4px}
@media (max-width:600px){
  main{padding:8px}
  h1{font-size:1.25rem}
  /* Below ~460 px the plots' 13 px text would shrink under 10 px: keep them that
     wide and let the figure scroll sideways instead. */
  figure{padding:4px 0;overflow-x:auto;-webkit-overflow-scrolling:touch}
  figure svg{min-width:460px}
  figcaption{padding:0 4px}
}
@media print{
  /* Landscape: the scaling table has some 26 columns; cells may wrap. */
  @page{size:A4 landscape;margin:10mm}
  main{max-width:none;padding:0}
  .page-scroll{overflow:visible;border:none}
  table{font-size:6.5pt;width:100%}
  th,th:first-child,td:first-child{position:static}
  th,td{padding:1px 2px;white-space:normal}
  .page-figures{display:grid;grid-template-columns:1fr 1fr;gap:6mm}
  figure{break-inside:avoid;page-break-inside:avoid;border:none;overflow:visible}
  figure svg{min-width:0}
  a{color:inherit;text-decoration:none}
}
)";
}  // namespace

HtmlPage::HtmlPage(std::string title) : title_(std::move(title)) {}

void HtmlPage::close_figures() {
  if (in_figures_) body_ += "</div>\n";
  in_figures_ = false;
}

void HtmlPage::heading(const std::string& text) {
  close_figures();
  // An id of the lower-cased words joined by '-', so a section can be linked to (#plots).
  std::string id;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) id += static_cast<char>(std::tolower(c));
    else if (!id.empty() && id.back() != '-') id += '-';
  }
  while (!id.empty() && id.back() == '-') id.pop_back();
  body_ += "<h2 id=\"" + id + "\">" + xml_escape(text) + "</h2>\n";
}

void HtmlPage::paragraph(const std::string& text) {
  close_figures();
  body_ += "<p>" + xml_escape(text) + "</p>\n";
}

void HtmlPage::list(const std::vector<std::string>& items, bool numbered) {
  close_figures();
  body_ += numbered ? "<ol>\n" : "<ul>\n";
  for (const std::string& item : items) body_ += "<li>" + xml_escape(item) + "</li>\n";
  body_ += numbered ? "</ol>\n" : "</ul>\n";
}

void HtmlPage::table(const std::string& table_html) {
  close_figures();
  body_ += "<div class=\"page-scroll\">\n" + table_html + "</div>\n";
}

void HtmlPage::figure(const std::string& svg, const std::string& caption,
                      const std::string& file) {
  if (!in_figures_) body_ += "<div class=\"page-figures\">\n";
  in_figures_ = true;
  // The SVG's XML declaration-free text is valid inline HTML as it is.
  body_ += "<figure>\n" + svg + "<figcaption>" + xml_escape(caption) + " (" + xml_escape(file) +
           ")</figcaption>\n</figure>\n";
}

std::string HtmlPage::str() const {
  std::string body = body_;
  if (in_figures_) body += "</div>\n";
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>" + xml_escape(title_) + "</title>\n<style>" + kStyle +
         "</style>\n</head>\n<body>\n<main>\n<h1>" + xml_escape(title_) + "</h1>\n" + body +
         "</main>\n</body>\n</html>\n";
}

}  // namespace sextant::reports
