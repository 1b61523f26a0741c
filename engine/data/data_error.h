// Errors in data files: a corrupt or truncated .idx/.bin, a malformed JSON line.
//
// Library code throws DataError; tools/ turns it into exit code 2 (DESIGN.md).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sextant::engine::data {

/// A problem in one data file, pointing at where it is.
/// `line` and `column` are 1-based; 0 means "not known" (binary files have none).
class DataError : public std::runtime_error {
 public:
  DataError(std::string file, std::string reason, int64_t line = 0, int64_t column = 0);

  const std::string& file() const { return file_; }
  const std::string& reason() const { return reason_; }
  int64_t line() const { return line_; }
  int64_t column() const { return column_; }

 private:
  std::string file_;
  std::string reason_;
  int64_t line_;
  int64_t column_;
};

}  // namespace sextant::engine::data
