#include "sim/core/gpu_preset_name.h"

#include <cctype>
#include <vector>

namespace sextant::sim {

namespace {

// The presets of configs/gpus that a CUDA device can be, with the memory
// their datasheets give and the range the runtime reports for it: an
// "80 GB" part has 80 GiB or a little less usable (the H100 SXM5 reports
// 81559 MiB = 79.6 GiB, the A100 SXM4 80GB 81920 MiB), the H200's 141 GB
// 143771 MiB = 140.4 GiB (NVIDIA H100/H200/A100 datasheets; cudaGetDeviceProperties
// totalGlobalMem as reported on those machines).
struct PresetRule {
  std::string_view chip;    // the word of the name
  std::string_view preset;  // configs/gpus/<preset>.yaml
  int datasheet_gb;         // the "<N>GB" of a name
  double min_gib, max_gib;  // the device's memory
};
constexpr PresetRule kRules[] = {
    {"H100", "h100-sxm-80gb", 80, 70, 90},
    {"H200", "h200-sxm-141gb", 141, 130, 150},
    {"A100", "a100-sxm-80gb", 80, 70, 90},
};

// Form factors with other clocks, power and interconnect than the SXM presets.
constexpr std::string_view kOtherFormFactors[] = {"PCIE", "NVL"};

// The name's words, upper-case: "NVIDIA A100-SXM4-80GB" -> NVIDIA, A100, SXM4, 80GB.
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> words(1);
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      words.back() += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// 80 for "80GB"; nullopt for any other word.
std::optional<int> gigabytes_of(const std::string& word) {
  if (word.size() < 3 || !word.ends_with("GB")) return std::nullopt;
  int value = 0;
  for (std::size_t i = 0; i + 2 < word.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(word[i]))) return std::nullopt;
    value = value * 10 + (word[i] - '0');
  }
  return value;
}

}  // namespace

std::string gpu_preset_name(std::string_view gpu_name, std::optional<std::int64_t> memory_bytes) {
  const std::vector<std::string> words = words_of(gpu_name);
  for (const std::string& w : words)
    for (const std::string_view other : kOtherFormFactors)
      if (w == other) return "";
  for (const std::string& w : words) {
    for (const PresetRule& rule : kRules) {
      if (w != rule.chip) continue;
      if (memory_bytes) {
        const double gib = static_cast<double>(*memory_bytes) / (1LL << 30);
        return gib > rule.min_gib && gib < rule.max_gib ? std::string(rule.preset) : "";
      }
      for (const std::string& m : words)
        if (const std::optional<int> gb = gigabytes_of(m)) return *gb == rule.datasheet_gb ? std::string(rule.preset) : "";
      return std::string(rule.preset);
    }
  }
  return "";
}

}  // namespace sextant::sim
