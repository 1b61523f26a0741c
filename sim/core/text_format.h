// Numbers in messages and tables, with their units, formatted one way everywhere.
#pragma once

#include <string>

namespace sextant::sim {

/// "74.2 GiB" (binary gibibytes, `digits` after the point).
std::string format_gib(double bytes, int digits = 1);
/// "8.1 %" for 0.081.
std::string format_percent(double fraction, int digits = 1);

}  // namespace sextant::sim
