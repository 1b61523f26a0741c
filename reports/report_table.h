// A table of text cells and its three renderings: Markdown (GitHub's pipe
// tables), CSV (RFC 4180) and HTML. Cells are already formatted; the writers
// only quote and align.
#pragma once

#include <string>
#include <vector>

namespace sextant::reports {

struct Table {
  std::vector<std::string> header;
  std::vector<bool> numeric;  // per column: right-aligned
  std::vector<std::vector<std::string>> rows;

  void add_column(std::string name, bool is_numeric);
};

/// Pipe table; '|' in a cell is escaped as "\|".
std::string to_markdown(const Table& table);

/// RFC 4180: CRLF line ends; a field with a comma, quote, CR or LF is quoted
/// and its quotes doubled.
std::string to_csv(const Table& table);

/// One RFC 4180 field.
std::string csv_field(const std::string& text);

/// <table> with a <thead>; cells escaped.
std::string to_html(const Table& table);

/// Parses RFC 4180 text (CRLF or LF line ends) into records of fields.
/// Throws std::invalid_argument with the 1-based line of an unterminated quote.
std::vector<std::vector<std::string>> parse_csv(const std::string& text);

}  // namespace sextant::reports
