// Positions in a text, and the one byte no text input may hold: NUL.
//
// yaml-cpp reads a NUL byte as "unknown escape character", JSON parsers as a
// syntax error; a file holding one is not text at all (a binary file, or a
// UTF-16 file without its byte-order mark), and the message should say so.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sextant::sim {

/// A 1-based line and column (the column counts bytes, as editors' byte columns do).
struct TextPosition {
  int line = 1;
  int column = 1;
};

/// The line and column of byte `offset` of `text` (offset <= text.size()).
TextPosition text_position(std::string_view text, std::size_t offset);

/// A problem with the bytes of a text, found before any parsing.
struct TextEncodingProblem {
  std::size_t offset = 0;  // 0-based byte offset
  TextPosition position;
  std::string message;  // "the file contains a NUL byte here: not a text file"
};

/// The first NUL byte of `text`, if it has one.
std::optional<TextEncodingProblem> nul_byte_problem(std::string_view text);

}  // namespace sextant::sim
