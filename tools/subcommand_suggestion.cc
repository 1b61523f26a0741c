#include "tools/subcommand_suggestion.h"

#include <algorithm>
#include <numeric>

namespace sextant::tools {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Wagner-Fischer, one row.
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> unknown_subcommand_message(const std::string& word,
                                                      const std::vector<std::string>& known) {
  if (std::find(known.begin(), known.end(), word) != known.end()) return std::nullopt;
  std::string nearest;
  std::size_t best = 3;  // more than 2 edits away is no suggestion
  for (const std::string& k : known) {
    const bool prefix = word.size() >= 3 && k.rfind(word, 0) == 0;
    const std::size_t d = prefix ? 1 : edit_distance(word, k);
    if (d < best) {
      best = d;
      nearest = k;
    }
  }
  std::string accepted;
  for (const std::string& k : known) accepted += (accepted.empty() ? "" : ", ") + k;
  return "unknown subcommand '" + word + "'" +
         (nearest.empty() ? "" : " (did you mean " + nearest + "?)") + "; accepted: " + accepted;
}

}  // namespace sextant::tools
