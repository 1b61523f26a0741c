#include "tools/numeric_option.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sextant::tools {

namespace {
std::string shortest(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.10g", v);
  return buffer;
}
}  // namespace

std::string whole_number_problem(const std::string& text, std::int64_t low, std::int64_t high) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < low || v > high) {
    return "expected a whole number from " + std::to_string(low) + " to " + std::to_string(high) +
           ", got '" + text + "'";
  }
  return "";
}

std::string number_problem(const std::string& text, double low, double high) {
  char* end = nullptr;
  const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < low ||
      v > high) {
    return "expected a number from " + shortest(low) + " to " + shortest(high) + ", got '" +
           text + "'";
  }
  return "";
}

CLI::Option* add_number_option(CLI::App& cmd, const std::string& name, double& value,
                               const std::string& description, double low, double high) {
  return cmd.add_option(name, value, description)
      ->check(CLI::Validator([low, high](std::string& text) { return number_problem(text, low, high); },
                             "NUMBER in [" + shortest(low) + ", " + shortest(high) + "]"));
}

}  // namespace sextant::tools
