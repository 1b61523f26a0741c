#include "sim/core/nearest_name.h"

#include <algorithm>
#include <numeric>

namespace sextant::sim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
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

std::optional<std::string> nearest_name(std::string_view word,
                                        const std::vector<std::string>& known, PrefixMatch prefix) {
  std::optional<std::string> nearest;
  std::size_t best = 3;  // more than 2 edits away is no suggestion
  for (const std::string& k : known) {
    const bool begins = prefix == PrefixMatch::kSuggests && word.size() >= 3 &&
                        std::string_view(k).substr(0, word.size()) == word;
    const std::size_t d = begins ? 1 : edit_distance(word, k);
    if (d < best) {
      best = d;
      nearest = k;
    }
  }
  return nearest;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& known,
                         PrefixMatch prefix) {
  const std::optional<std::string> nearest = nearest_name(word, known, prefix);
  return nearest ? " (did you mean " + *nearest + "?)" : "";
}

}  // namespace sextant::sim
