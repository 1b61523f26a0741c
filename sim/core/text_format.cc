#include "sim/core/text_format.h"

#include <cstdio>

namespace sextant::sim {

std::string format_gib(double bytes, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f GiB", digits, bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string format_percent(double fraction, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f %%", digits, 100.0 * fraction);
  return text;
}

}  // namespace sextant::sim
