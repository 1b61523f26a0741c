// "did you mean ...?": the known name nearest a mistyped one, by edit distance.
// Shared by every message that lists accepted names (subcommands, presets,
// config.json keys), so a typo gets the same help everywhere.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sextant::sim {

/// Levenshtein distance (insertions, deletions, substitutions, each 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// Whether a word that begins a known name (3 characters or more) suggests it.
/// Preset names say which variant they are ("h100-sxm-80gb"), so "h100" should
/// not pick one for the user; subcommands and keys have no variants.
enum class PrefixMatch { kSuggests, kIgnored };

/// The name of `known` nearest `word`, when it is at most 2 edits away or
/// (with PrefixMatch::kSuggests) `word` begins it; std::nullopt otherwise.
std::optional<std::string> nearest_name(std::string_view word,
                                        const std::vector<std::string>& known,
                                        PrefixMatch prefix = PrefixMatch::kSuggests);

/// " (did you mean X?)" for nearest_name's X, or "" when there is none.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known,
                         PrefixMatch prefix = PrefixMatch::kSuggests);

}  // namespace sextant::sim
