#include "engine/data/data_error.h"

#include <utility>

namespace sextant::engine::data {

namespace {
// "file:line:col: reason", leaving out what is not known (as sim::Diagnostic does).
std::string format(const std::string& file, const std::string& reason, int64_t line,
                   int64_t column) {
  std::string out = file;
  // append() rather than `out += ":" + ...`, which trips GCC 12's -Wrestrict false positive.
  if (line > 0) {
    out.append(":").append(std::to_string(line));
    if (column > 0) out.append(":").append(std::to_string(column));
  }
  return out.append(": ").append(reason);
}
}  // namespace

DataError::DataError(std::string file, std::string reason, int64_t line, int64_t column)
    : std::runtime_error(format(file, reason, line, column)),
      file_(std::move(file)),
      reason_(std::move(reason)),
      line_(line),
      column_(column) {}

}  // namespace sextant::engine::data
