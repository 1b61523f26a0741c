// Loose JSON lines (one JSON object per line, as Megatron's preprocess_data.py
// reads): yields the string under one key of each line, in order.
//
// Lines holding only whitespace are skipped (a trailing blank line is common).
// Anything else that is not an object with a string under the key is a
// DataError "file:line[:column]: reason"; nothing is skipped silently. Each
// line is strict JSON (sim/core/strict_json.h): a key given twice in an object
// and bytes that are not UTF-8 are refused by name, not read one way or another.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace sextant::engine::data {

class JsonlReader {
 public:
  /// Opens `path`; throws DataError if it cannot be read.
  JsonlReader(std::string path, std::string key);

  /// The next line's value under the key into `text`; false at the end of the file.
  bool next(std::string& text);

  /// 1-based number of the line last read (0 before the first).
  int64_t line() const { return line_; }
  /// Bytes read so far, newlines included.
  int64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string key_;
  std::ifstream in_;
  std::string buffer_;
  int64_t line_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace sextant::engine::data
