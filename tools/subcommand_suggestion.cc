#include "tools/subcommand_suggestion.h"

#include <algorithm>

#include "sim/core/nearest_name.h"

namespace sextant::tools {

std::optional<std::string> unknown_subcommand_message(const std::string& word,
                                                      const std::vector<std::string>& known) {
  if (std::find(known.begin(), known.end(), word) != known.end()) return std::nullopt;
  std::string accepted;
  for (const std::string& k : known) accepted += (accepted.empty() ? "" : ", ") + k;
  return "unknown subcommand '" + word + "'" + sim::did_you_mean(word, known) + "; accepted: " +
         accepted;
}

}  // namespace sextant::tools
