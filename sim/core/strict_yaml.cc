#include "sim/core/strict_yaml.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "sim/core/text_encoding.h"

namespace sextant::sim {

namespace {

int one_based(int zero_based) { return zero_based < 0 ? 0 : zero_based + 1; }

std::string describe(const YAML::Node& value) {
  if (is_quoted_scalar(value)) return "the string \"" + value.Scalar() + "\"";
  if (value.IsScalar()) return "'" + value.Scalar() + "'";
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a mapping";
  return "nothing";
}

// Integers print whole (4294967296, not 4.29497e+09); other values with 6 digits.
std::string format_number(double value) {
  char text[64];
  // Range first: converting a double outside long long's range is undefined.
  if (std::abs(value) < 1e15 && value == std::trunc(value)) {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(value));
  } else {
    std::snprintf(text, sizeof text, "%g", value);
  }
  return text;
}

// A plain scalar of decimal digits (an optional sign), such as
// 99999999999999999999: an integer, just not one that fits.
bool is_integer_text(const std::string& text) {
  const std::size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  return text.size() > digits &&
         text.find_first_not_of("0123456789", digits) == std::string::npos;
}

}  // namespace

std::optional<YAML::Node> parse_yaml_text(const std::string& text, const std::string& file,
                                          std::vector<Diagnostic>& diagnostics) {
  // yaml-cpp says "unknown escape character" for a NUL byte: name the byte instead.
  if (const std::optional<TextEncodingProblem> problem = nul_byte_problem(text)) {
    diagnostics.push_back(
        {file, problem->position.line, problem->position.column, "", problem->message});
    return std::nullopt;
  }
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.size() > 1) {
      diagnostics.push_back(diagnostic_at(documents[1], file, "",
                                          "a second YAML document ('---'); each file holds one"));
      return std::nullopt;
    }
    return documents.empty() ? YAML::Node() : documents.front();
  } catch (const YAML::Exception& e) {
    diagnostics.push_back({file, one_based(e.mark.line), one_based(e.mark.column), "",
                           "invalid YAML: " + e.msg});
    return std::nullopt;
  }
}

bool is_quoted_scalar(const YAML::Node& value) { return value.IsScalar() && value.Tag() == "!"; }

Diagnostic diagnostic_at(const YAML::Node& node, const std::string& file, std::string key,
                         std::string message) {
  const YAML::Mark mark = node.Mark();
  return {file, one_based(mark.line), one_based(mark.column), std::move(key), std::move(message)};
}

StrictMap::StrictMap(YAML::Node node, std::string file, std::vector<Diagnostic>& diagnostics,
                     std::string prefix)
    : node_(std::move(node)),
      file_(std::move(file)),
      diagnostics_(diagnostics),
      prefix_(std::move(prefix)),
      is_map_(node_.IsDefined() && node_.IsMap()) {
  if (!is_map_) return;
  // YAML forbids a key twice; yaml-cpp keeps both, so say so rather than read one.
  std::set<std::string, std::less<>> seen;
  for (const auto& entry : node_) {
    if (!entry.first.IsScalar()) continue;
    const std::string& key = entry.first.Scalar();
    if (!seen.insert(key).second) {
      diagnostics_.push_back(diagnostic_at(entry.first, file_, full_key(key),
                                           "given twice; each key may appear once"));
      error_keys_.insert(key);
    }
  }
}

bool StrictMap::has(std::string_view key) const {
  if (!is_map_) return false;
  for (const auto& entry : node_) {
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return true;
  }
  return false;
}

std::vector<std::string> StrictMap::keys() const {
  std::vector<std::string> out;
  if (!is_map_) return out;
  for (const auto& entry : node_)
    if (entry.first.IsScalar()) out.push_back(entry.first.Scalar());
  return out;
}

YAML::Node StrictMap::find(std::string_view key) {
  read_keys_.insert(std::string(key));
  if (!is_map_) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& entry : node_) {
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

void StrictMap::type_error(std::string_view key, const YAML::Node& value, const char* expected) {
  error_keys_.insert(std::string(key));
  diagnostics_.push_back(
      diagnostic_at(value, file_, full_key(key), std::string("expected ") + expected + ", got " +
                                                     describe(value)));
}

void StrictMap::report(std::string_view key, std::string message) {
  YAML::Node value = is_map_ ? node_[std::string(key)] : node_;
  if (value.IsDefined() && !value.IsNull()) {
    diagnostics_.push_back(diagnostic_at(value, file_, full_key(key), std::move(message)));
  } else {
    diagnostics_.push_back(diagnostic_at(node_, file_, full_key(key), std::move(message)));
  }
}

std::optional<std::string> StrictMap::optional_string(std::string_view key) {
  YAML::Node value = find(key);
  if (!value.IsDefined() || value.IsNull()) return std::nullopt;
  if (!value.IsScalar()) {
    type_error(key, value, "a string");
    return std::nullopt;
  }
  return value.Scalar();
}

std::optional<std::int64_t> StrictMap::optional_int(std::string_view key) {
  YAML::Node value = find(key);
  if (!value.IsDefined() || value.IsNull()) return std::nullopt;
  std::int64_t out = 0;
  if (!value.IsScalar() || is_quoted_scalar(value)) {
    type_error(key, value, "an integer");
    return std::nullopt;
  }
  if (!YAML::convert<std::int64_t>::decode(value, out)) {
    if (!is_integer_text(value.Scalar())) {
      type_error(key, value, "an integer");
      return std::nullopt;
    }
    error_keys_.insert(std::string(key));
    diagnostics_.push_back(diagnostic_at(
        value, file_, full_key(key),
        "is out of range: " + value.Scalar() + " does not fit in a 64-bit integer (accepted: " +
            std::to_string(std::numeric_limits<std::int64_t>::min()) + " to " +
            std::to_string(std::numeric_limits<std::int64_t>::max()) + ")"));
    return std::nullopt;
  }
  return out;
}

std::optional<double> StrictMap::optional_double(std::string_view key) {
  YAML::Node value = find(key);
  if (!value.IsDefined() || value.IsNull()) return std::nullopt;
  double out = 0;
  if (!value.IsScalar() || is_quoted_scalar(value) || !YAML::convert<double>::decode(value, out) ||
      !std::isfinite(out)) {
    type_error(key, value, "a finite number");
    return std::nullopt;
  }
  return out;
}

std::optional<bool> StrictMap::optional_bool(std::string_view key) {
  YAML::Node value = find(key);
  if (!value.IsDefined() || value.IsNull()) return std::nullopt;
  bool out = false;
  if (!value.IsScalar() || is_quoted_scalar(value) || !YAML::convert<bool>::decode(value, out)) {
    type_error(key, value, "true or false");
    return std::nullopt;
  }
  return out;
}

bool StrictMap::check_required(std::string_view key, const char* expected) {
  if (!has(key)) {
    diagnostics_.push_back(diagnostic_at(node_, file_, full_key(key), "required key is missing"));
    error_keys_.insert(std::string(key));
    return false;
  }
  const YAML::Node value = find(key);
  if (value.IsNull()) {
    // yaml-cpp places an empty value at the next token: point at the key instead.
    // (Never assign YAML::Node to YAML::Node here: operator= overwrites the
    // referenced node's content rather than rebinding.)
    YAML::Mark mark = node_.Mark();
    for (const auto& entry : node_) {
      if (entry.first.IsScalar() && entry.first.Scalar() == key) mark = entry.first.Mark();
    }
    diagnostics_.push_back({file_, mark.line + 1, mark.column + 1, full_key(key),
                            std::string("has no value; expected ") + expected});
    error_keys_.insert(std::string(key));
    return false;
  }
  return true;
}

std::string StrictMap::required_string(std::string_view key) {
  if (!check_required(key, "a string")) return "";
  return optional_string(key).value_or("");
}
std::int64_t StrictMap::required_int(std::string_view key) {
  if (!check_required(key, "an integer")) return 0;
  return optional_int(key).value_or(0);
}
double StrictMap::required_double(std::string_view key) {
  if (!check_required(key, "a finite number")) return 0.0;
  return optional_double(key).value_or(0.0);
}
bool StrictMap::required_bool(std::string_view key) {
  if (!check_required(key, "true or false")) return false;
  return optional_bool(key).value_or(false);
}

StrictMap StrictMap::child(std::string_view key) {
  YAML::Node value = find(key);
  if (value.IsDefined() && !value.IsNull() && !value.IsMap()) {
    type_error(key, value, "a mapping");
  }
  return StrictMap(value, file_, diagnostics_, full_key(key) + ".");
}

void StrictMap::require_positive(std::string_view key, double value) {
  if (!has(key) || has_error(key)) return;  // reported already
  if (!(value > 0)) report(key, "must be positive, got " + format_number(value));
}

void StrictMap::require_in_range(std::string_view key, double value, double low, double high) {
  if (!has(key) || has_error(key)) return;
  if (value < low || value > high) {
    report(key, "must be in [" + format_number(low) + ", " + format_number(high) + "], got " +
                    format_number(value));
  }
}

void StrictMap::finish(const std::vector<std::string_view>& accepted) {
  if (!is_map_) return;
  for (const auto& entry : node_) {
    const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (read_keys_.count(name)) continue;
    std::string list;
    for (std::string_view a : accepted) {
      if (!list.empty()) list += ", ";
      list += a;
    }
    diagnostics_.push_back(diagnostic_at(entry.first, file_, full_key(name),
                                         "unknown key; accepted keys: " + list));
  }
}

}  // namespace sextant::sim
