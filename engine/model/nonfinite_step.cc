#include "engine/model/nonfinite_step.h"

#include <cmath>
#include <cstdio>

namespace sextant::engine {

namespace {
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";  // printf may say "-nan" for the sign bit a NaN happens to carry
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}
}  // namespace

std::optional<NonFinitePolicy> parse_nonfinite_policy(std::string_view text) {
  if (text == "stop") return NonFinitePolicy::kStop;
  if (text == "skip") return NonFinitePolicy::kSkip;
  return std::nullopt;
}

bool step_is_finite(double loss, double grad_norm) { return std::isfinite(loss) && std::isfinite(grad_norm); }

int first_nonfinite(std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return static_cast<int>(i);
  return -1;
}

std::string nonfinite_step_message(int step, double loss, double grad_norm, const std::string& tensor) {
  std::string m = "step " + std::to_string(step) + ": loss " + number_text(loss) + ", gradient norm " +
                  number_text(grad_norm);
  if (!tensor.empty()) {
    m += "; the first parameter whose gradient is not finite is '" + tensor + "'";
  } else if (!std::isfinite(grad_norm)) {
    m += "; no single parameter's gradient is non-finite (the sum of squares overflowed)";
  } else {
    m += " (the gradients are finite)";
  }
  return m;
}

}  // namespace sextant::engine
