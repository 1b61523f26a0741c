// Markdown, CSV (RFC 4180) and HTML renderings of a table, and the CSV reader.
#include "reports/report_table.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace sextant::reports {
namespace {

Table sample() {
  Table t;
  t.add_column("layout", false);
  t.add_column("step time (s)", true);
  t.rows.push_back({"tp=8,pp=4", "1.250"});
  t.rows.push_back({"say \"hi\" | <b>", "2"});
  return t;
}

TEST(ReportTable, CsvQuotesCommasAndQuotesWithCrlf) {
  EXPECT_EQ(to_csv(sample()),
            "layout,step time (s)\r\n"
            "\"tp=8,pp=4\",1.250\r\n"
            "\"say \"\"hi\"\" | <b>\",2\r\n");
  EXPECT_EQ(csv_field("a\nb"), "\"a\nb\"");
  EXPECT_EQ(csv_field("plain"), "plain");
}

TEST(ReportTable, CsvRoundTrips) {
  const auto records = parse_csv(to_csv(sample()));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1][0], "tp=8,pp=4");
  EXPECT_EQ(records[2][0], "say \"hi\" | <b>");
  // LF line ends, a quoted line break, a blank line and no final newline read too.
  const auto lf = parse_csv("a,b\n\"x\ny\",2\n\n3,4");
  ASSERT_EQ(lf.size(), 3u);
  EXPECT_EQ(lf[1][0], "x\ny");
  EXPECT_EQ(lf[2][1], "4");
  EXPECT_THROW(parse_csv("a,\"b\n"), std::invalid_argument);
}

TEST(ReportTable, MarkdownEscapesPipesAndAlignsNumbers) {
  const std::string md = to_markdown(sample());
  EXPECT_NE(md.find("| layout | step time (s) |\n| --- | ---: |\n"), std::string::npos);
  EXPECT_NE(md.find("| say \"hi\" \\| <b> | 2 |"), std::string::npos);
}

TEST(ReportTable, HtmlEscapesCells) {
  const std::string html = to_html(sample());
  EXPECT_NE(html.find("<th class=\"num\">step time (s)</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>say &quot;hi&quot; | &lt;b&gt;</td><td class=\"num\">2</td>"),
            std::string::npos);
}

}  // namespace
}  // namespace sextant::reports
