// "unknown subcommand 'simulat' (did you mean simulate?)": the nearest known
// subcommand by edit distance, for a first word that names none.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sextant::tools {

/// The message for `word` when it is not one of `known`; std::nullopt when it is.
/// Suggests the nearest name when it is at most 2 edits (or a prefix) away
/// (sim/core/nearest_name.h).
std::optional<std::string> unknown_subcommand_message(const std::string& word,
                                                      const std::vector<std::string>& known);

}  // namespace sextant::tools
