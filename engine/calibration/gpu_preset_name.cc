#include "engine/calibration/gpu_preset_name.h"

namespace sextant::engine::calibration {

std::string gpu_preset_name(const std::string& name, std::int64_t memory_bytes) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  const double gib = static_cast<double>(memory_bytes) / (1LL << 30);
  if (has("PCIe") || has("NVL")) return "";
  // The SXM H100 reports "NVIDIA H100 80GB HBM3" (PCIe: "NVIDIA H100 PCIe").
  if (has("H100") && (has("HBM3") || has("SXM")) && gib > 70 && gib < 90) return "h100-sxm-80gb";
  if (has("H200") && gib > 130) return "h200-sxm-141gb";
  if (has("A100") && has("SXM") && gib > 70 && gib < 90) return "a100-sxm-80gb";
  return "";
}

}  // namespace sextant::engine::calibration
