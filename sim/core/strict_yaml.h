// Strict reading of one YAML mapping: every key is either read or reported.
//
// Loaders read each accepted key through a StrictMap; at the end finish()
// reports the keys nobody asked for, listing the accepted ones. Problems are
// appended to a shared diagnostics list instead of thrown, so one load reports
// all of them. Internal to sim/ (yaml-cpp stays out of public headers).
//
// As strict as JSON: a quoted scalar ("4096") is a string, never a number or
// boolean; an integer beyond 64 bits is "out of range", not "not an integer";
// a file with a NUL byte is not a text file (parse_yaml_text says so rather
// than yaml-cpp's "unknown escape character").
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/config_error.h"

namespace sextant::sim {

/// Parses `text` into a YAML node; on failure appends a diagnostic (with the
/// parser's line and column) and returns std::nullopt.
std::optional<YAML::Node> parse_yaml_text(const std::string& text, const std::string& file,
                                          std::vector<Diagnostic>& diagnostics);

/// Whether `value` is a quoted scalar ("4096" or '4096'): a string, never a
/// number or boolean, though yaml-cpp would convert it (it tags quoted scalars
/// "!" and plain ones "?").
bool is_quoted_scalar(const YAML::Node& value);

/// Diagnostic located at `node` (1-based line and column).
Diagnostic diagnostic_at(const YAML::Node& node, const std::string& file, std::string key,
                         std::string message);

class StrictMap {
 public:
  /// `prefix` names the parent for nested maps ("moe." gives "moe.num_experts").
  StrictMap(YAML::Node node, std::string file, std::vector<Diagnostic>& diagnostics,
            std::string prefix = "");

  bool is_map() const { return is_map_; }
  bool has(std::string_view key) const;

  /// Required values: a missing key or wrong type is a diagnostic and the
  /// returned value is a harmless placeholder (0, "", false).
  std::string required_string(std::string_view key);
  std::int64_t required_int(std::string_view key);
  double required_double(std::string_view key);
  bool required_bool(std::string_view key);

  /// Optional values: absent gives std::nullopt; present but wrong type is a diagnostic.
  std::optional<std::string> optional_string(std::string_view key);
  std::optional<std::int64_t> optional_int(std::string_view key);
  std::optional<double> optional_double(std::string_view key);
  std::optional<bool> optional_bool(std::string_view key);

  /// A nested mapping; marks the key as read. Absent gives a StrictMap with is_map() false.
  StrictMap child(std::string_view key);
  /// The raw value of `key` (lists of rows); marks the key as read. Absent: Undefined.
  YAML::Node value(std::string_view key) { return find(key); }
  /// Every key of the mapping, in file order (maps whose keys are data, not schema).
  std::vector<std::string> keys() const;

  /// Value checks that report at the key's position.
  void require_positive(std::string_view key, double value);
  void require_in_range(std::string_view key, double value, double low, double high);
  void report(std::string_view key, std::string message);

  /// Reports every key that was never read, with the list of accepted keys.
  /// `accepted` lists all keys this map allows.
  void finish(const std::vector<std::string_view>& accepted);

  const std::string& file() const { return file_; }
  /// The shared diagnostics list (for values inside lists, reported at their own node).
  std::vector<Diagnostic>& diagnostics() { return diagnostics_; }
  /// "moe.num_experts" for key "num_experts" of the child "moe".
  std::string full_key(std::string_view key) const { return prefix_ + std::string(key); }

  /// False (with a diagnostic) when a required key is absent or has no value.
  bool check_required(std::string_view key, const char* expected);
  /// Whether `key` was already reported (so value checks stay quiet about it).
  bool has_error(std::string_view key) const { return error_keys_.count(key) > 0; }

 private:
  YAML::Node find(std::string_view key);
  void type_error(std::string_view key, const YAML::Node& value, const char* expected);

  YAML::Node node_;
  std::string file_;
  std::vector<Diagnostic>& diagnostics_;
  std::string prefix_;
  bool is_map_ = false;
  std::set<std::string, std::less<>> read_keys_;
  std::set<std::string, std::less<>> error_keys_;  // keys already reported: no range checks
};

}  // namespace sextant::sim
