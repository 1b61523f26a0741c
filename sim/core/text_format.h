// Numbers in messages and tables, with their units, formatted one way everywhere.
#pragma once

#include <string>
#include <string_view>

namespace sextant::sim {

/// "74.2 GiB" (binary gibibytes, `digits` after the point).
std::string format_gib(double bytes, int digits = 1);
/// "3.14" for (3.14159, 2): `digits` after the point, no unit.
std::string format_fixed(double value, int digits);
/// "8.1 %" for 0.081.
std::string format_percent(double fraction, int digits = 1);
/// `value` as printf's `format` (one double conversion, e.g. "%.3f ms") prints
/// it, for table cells; longer than 63 characters is cut.
std::string format_number(const char* format, double value);

/// Why `name` cannot name a preset in messages, JSON and CSV, or "" when it can:
/// it must be non-empty, valid UTF-8 (RFC 3629: no overlong forms, surrogates or
/// code points above U+10FFFF) and free of control characters.
std::string name_problem(std::string_view name);

}  // namespace sextant::sim
