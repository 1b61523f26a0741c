// Errors in user input (YAML presets, --layout, case files).
//
// Library code collects every problem it finds into one ConfigError so the user
// fixes them all in one pass; only tools/ turns it into exit code 2.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace sextant::sim {

/// One problem in one input, pointing at where it is.
/// `line` and `column` are 1-based; 0 means "not known" (e.g. a missing file).
struct Diagnostic {
  std::string file;  // path, or a pseudo-name like "--layout"
  int line = 0;
  int column = 0;
  std::string key;      // YAML key or layout knob; empty when not about one
  std::string message;  // what is wrong and what is accepted

  /// "file:line:col: key: message" (parts that are unknown are left out).
  std::string to_string() const;
};

/// Thrown by loaders and validators; carries every diagnostic found.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

/// Throws ConfigError if `diagnostics` is not empty.
void throw_if_any(std::vector<Diagnostic> diagnostics);

}  // namespace sextant::sim
