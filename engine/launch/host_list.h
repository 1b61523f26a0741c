// Slurm's compressed host lists: "node[01-04,07],gpu5" names node01, node02,
// node03, node04, node07 and gpu5. Ranges keep their zero padding (the width
// of the range's first number), as `scontrol show hostnames` prints them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sextant::engine::launch {

/// Every host `list` names, in order. Throws sim::ConfigError naming `source`
/// (the variable it came from) and the column of the first problem.
std::vector<std::string> expand_host_list(std::string_view list, std::string_view source);

}  // namespace sextant::engine::launch
