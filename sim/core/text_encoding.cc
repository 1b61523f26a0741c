#include "sim/core/text_encoding.h"

namespace sextant::sim {

TextPosition text_position(std::string_view text, std::size_t offset) {
  TextPosition p;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

std::optional<TextEncodingProblem> nul_byte_problem(std::string_view text) {
  const std::size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return TextEncodingProblem{nul, text_position(text, nul),
                             "the file contains a NUL byte here: not a text file (a binary "
                             "file, or UTF-16 text?)"};
}

}  // namespace sextant::sim
