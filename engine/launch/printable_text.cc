#include "engine/launch/printable_text.h"

namespace sextant::engine::launch {
namespace {

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

}  // namespace

bool has_control_character(const std::string& text) {
  for (const char c : text)
    if (is_control(c)) return true;
  return false;
}

std::string printable_text(const std::string& text) {
  constexpr const char* kHex = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (is_control(c)) out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    else out += c;
  }
  return out;
}

}  // namespace sextant::engine::launch
