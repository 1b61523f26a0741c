// Writing JSON text by hand (sim/ may not depend on a JSON library): strings
// escaped per RFC 8259, Sec. 7, and numbers that round-trip.
#pragma once

#include <string>
#include <string_view>

namespace sextant::sim {

/// Appends `text` as a quoted JSON string: " and \ escaped, control
/// characters as \n, \t, ... or \u00XX; other bytes (UTF-8) pass through.
void append_json_string(std::string& out, std::string_view text);

/// Appends a finite number in the shortest form that reads back exactly
/// (std::to_chars); NaN and infinities, which JSON lacks, as null.
void append_json_number(std::string& out, double value);

}  // namespace sextant::sim
