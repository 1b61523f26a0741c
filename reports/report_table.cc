#include "reports/report_table.h"

#include <stdexcept>

#include "reports/svg_document.h"

namespace sextant::reports {

void Table::add_column(std::string name, bool is_numeric) {
  header.push_back(std::move(name));
  numeric.push_back(is_numeric);
}

std::string to_markdown(const Table& table) {
  auto cell = [](const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c == '|') out += "\\|";
      else if (c == '\n') out += ' ';
      else out += c;
    }
    return out;
  };
  std::string out = "|";
  for (const std::string& h : table.header) out += " " + cell(h) + " |";
  out += "\n|";
  for (std::size_t c = 0; c < table.header.size(); ++c) {
    out += c < table.numeric.size() && table.numeric[c] ? " ---: |" : " --- |";
  }
  out += "\n";
  for (const auto& row : table.rows) {
    out += "|";
    for (const std::string& v : row) out += " " + cell(v) + " |";
    out += "\n";
  }
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += "\"\"";
    else out += c;
  }
  return out + "\"";
}

std::string to_csv(const Table& table) {
  auto line = [](const std::vector<std::string>& fields) {
    std::string out;
    for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    return out + "\r\n";
  };
  std::string out = line(table.header);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

std::string to_html(const Table& table) {
  std::string out = "<table>\n<thead><tr>";
  for (std::size_t c = 0; c < table.header.size(); ++c) {
    const bool num = c < table.numeric.size() && table.numeric[c];
    out += std::string(num ? "<th class=\"num\">" : "<th>") + xml_escape(table.header[c]) + "</th>";
  }
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) {
      const bool num = c < table.numeric.size() && table.numeric[c];
      out += std::string(num ? "<td class=\"num\">" : "<td>") + xml_escape(row[c]) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, field_started = false;
  int line = 1, quote_line = 0;
  auto end_field = [&] {
    record.push_back(field);
    field.clear();
    field_started = false;
  };
  auto end_record = [&] {
    end_field();
    if (!(record.size() == 1 && record[0].empty())) records.push_back(record);  // blank line
    record.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = true;
      field_started = true;
      quote_line = line;
    } else if (c == ',') {
      end_field();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      // CRLF: the LF ends the record
    } else if (c == '\n') {
      ++line;
      end_record();
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) {
    throw std::invalid_argument("quoted field opened on line " + std::to_string(quote_line) +
                                " is never closed");
  }
  if (field_started || !record.empty()) end_record();
  return records;
}

}  // namespace sextant::reports
