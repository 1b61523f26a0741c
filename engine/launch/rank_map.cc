#include "engine/launch/rank_map.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "sim/comm/group_placement.h"

namespace sextant::engine::launch {

std::string placement_line(const RankPlacement& p) { return p.host + " " + std::to_string(p.gpu); }

RankPlacement parse_placement_line(const std::string& line) {
  RankPlacement p;
  const std::size_t space = line.rfind(' ');
  if (space == std::string::npos) return {line, 0};
  p.host = line.substr(0, space);
  try {
    p.gpu = std::stoi(line.substr(space + 1));
  } catch (const std::exception&) {
    p.gpu = -1;
  }
  return p;
}

std::string rank_map_table(const std::vector<RankPlacement>& ranks, const sim::ParallelLayout& layout) {
  std::size_t host_width = 4;
  for (const RankPlacement& p : ranks) host_width = std::max(host_width, p.host.size());
  std::ostringstream out;
  out << "rank  " << std::left << std::setw(static_cast<int>(host_width)) << "host" << std::right
      << "  gpu  tp  cp  ep  dp  pp\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const sim::RankCoordinates c = sim::rank_coordinates(static_cast<int>(r), layout);
    out << std::setw(4) << r << "  " << std::left << std::setw(static_cast<int>(host_width))
        << ranks[r].host << std::right << std::setw(5) << ranks[r].gpu;
    for (int v : {c.tp, c.cp, c.ep, c.dp, c.pp}) out << std::setw(4) << v;
    out << "\n";
  }
  return out.str();
}

}  // namespace sextant::engine::launch
