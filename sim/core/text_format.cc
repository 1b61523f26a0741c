#include "sim/core/text_format.h"

#include <cstdio>

namespace sextant::sim {

namespace {
std::string hex_byte(unsigned char b) {
  char text[4];
  std::snprintf(text, sizeof text, "%02x", b);
  return text;
}
}  // namespace

std::string format_gib(double bytes, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f GiB", digits, bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string format_fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string format_percent(double fraction, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f %%", digits, 100.0 * fraction);
  return text;
}

std::string format_number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(name[i]); };
  const auto at = [](std::size_t i) { return " at byte " + std::to_string(i); };
  for (std::size_t i = 0; i < name.size();) {
    const unsigned char b = byte(i);
    if (b < 0x20 || b == 0x7f) return "contains a control character" + at(i);
    std::size_t length = 0;
    unsigned int code = 0;
    if (b < 0x80) length = 1, code = b;
    else if (b >= 0xc2 && b <= 0xdf) length = 2, code = b & 0x1fu;
    else if (b >= 0xe0 && b <= 0xef) length = 3, code = b & 0x0fu;
    else if (b >= 0xf0 && b <= 0xf4) length = 4, code = b & 0x07u;
    else return "is not valid UTF-8 (byte 0x" + hex_byte(b) + at(i) + ")";
    if (i + length > name.size()) return "is not valid UTF-8 (truncated sequence" + at(i) + ")";
    for (std::size_t k = 1; k < length; ++k) {
      if ((byte(i + k) & 0xc0u) != 0x80u) {
        return "is not valid UTF-8 (byte 0x" + hex_byte(byte(i + k)) + at(i + k) + ")";
      }
      code = (code << 6) | (byte(i + k) & 0x3fu);
    }
    const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
    if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) {
      return "is not valid UTF-8 (invalid sequence" + at(i) + ")";
    }
    i += length;
  }
  return "";
}

}  // namespace sextant::sim
