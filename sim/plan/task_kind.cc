#include "sim/plan/task_kind.h"

#include <algorithm>

namespace sextant::sim {

std::string task_kind(std::string_view name) {
  auto drop_part = [&name](std::string_view label) {
    if (name.starts_with(label)) {
      const std::size_t dot = name.find('.');
      name.remove_prefix(dot == std::string_view::npos ? name.size() : dot + 1);
    }
  };
  drop_part("stage");
  drop_part("mb");
  std::string kind;
  if (name.starts_with("layer")) {
    kind = "layer*";
    name.remove_prefix(std::min(name.find('.'), name.size()));
  }
  // A data-parallel bucket's collectives: one kind for all of them
  // ("dp.all_gather.bucket*", "dp.all_gather.bucket*.fwd" under FSDP).
  if (const std::size_t bucket = name.rfind(".bucket"); bucket != std::string_view::npos) {
    std::size_t digits = bucket + std::string_view(".bucket").size();
    const std::size_t begin = digits;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    if (digits > begin) {
      kind += name.substr(0, begin);
      kind += '*';
      name.remove_prefix(digits);
    }
  }
  kind += name;
  return kind;
}

}  // namespace sextant::sim
