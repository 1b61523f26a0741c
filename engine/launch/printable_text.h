// A user's text as a message may show it: control characters (a newline, a
// tab, NUL, DEL) written as \n, \t or \xNN, so an error about a value that
// must not reach a script does not print that value raw.
#pragma once

#include <string>

namespace sextant::engine::launch {

/// True when `text` holds a byte below 0x20 or DEL (0x7f).
bool has_control_character(const std::string& text);

/// `text` with each control character escaped ("a\nb" -> "a\\nb").
std::string printable_text(const std::string& text);

}  // namespace sextant::engine::launch
