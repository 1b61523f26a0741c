#include "engine/launch/host_list.h"

#include <cctype>

#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

[[noreturn]] void bad(std::string_view list, std::string_view source, std::size_t at,
                      const std::string& what) {
  // Line 1: the variable holds one line; the column points into it.
  throw sim::ConfigError({{std::string(source), 1, static_cast<int>(at) + 1, "",
                           what + " in host list '" + std::string(list) +
                               "' (expected hosts like node[01-04,07],gpu5)"}});
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Expands one bracket's body, "01-04,07", appending prefix+number+suffix... to out.
// `at` is the body's column in `list`, for messages.
std::vector<std::string> expand_ranges(std::string_view body, std::string_view list,
                                       std::string_view source, std::size_t at) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = std::min(body.find(',', start), body.size());
    const std::string_view item = body.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const std::string_view low = item.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : item.substr(dash + 1);
    if (!all_digits(low) || !all_digits(high))
      bad(list, source, at + start, "'" + std::string(item) + "' is not a number or a range a-b");
    const long first = std::stol(std::string(low)), last = std::stol(std::string(high));
    if (last < first || last - first > 100000)
      bad(list, source, at + start, "range '" + std::string(item) + "' runs backwards or is too long");
    for (long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_host_list(std::string_view list, std::string_view source) {
  std::vector<std::string> hosts;
  std::size_t i = 0;
  while (i < list.size()) {
    // One entry: text with any number of [ranges] groups, up to a comma at depth 0.
    std::vector<std::string> expanded{""};
    while (i < list.size() && list[i] != ',') {
      if (list[i] == '[') {
        const std::size_t close = list.find(']', i);
        if (close == std::string_view::npos) bad(list, source, i, "'[' without ']'");
        const auto numbers = expand_ranges(list.substr(i + 1, close - i - 1), list, source, i + 1);
        std::vector<std::string> next;
        for (const std::string& head : expanded)
          for (const std::string& n : numbers) next.push_back(head + n);
        expanded = std::move(next);
        i = close + 1;
      } else if (list[i] == ']') {
        bad(list, source, i, "']' without '['");
      } else {
        for (std::string& head : expanded) head += list[i];
        ++i;
      }
    }
    if (expanded.size() == 1 && expanded[0].empty()) bad(list, source, i, "an empty host name");
    hosts.insert(hosts.end(), expanded.begin(), expanded.end());
    ++i;  // the comma
  }
  if (hosts.empty()) bad(list, source, 0, "no host");
  return hosts;
}

}  // namespace sextant::engine::launch
