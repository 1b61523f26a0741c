#include "sim/comm/group_placement.h"

#include <algorithm>

namespace sextant::sim {

GroupPlacement place_group(int size, int stride, int gpus_per_node) {
  GroupPlacement out;
  out.size = size;
  const int per_node = stride >= gpus_per_node ? 1 : gpus_per_node / stride;
  out.ranks_per_node = std::clamp(per_node, 1, size);
  out.nodes = (size + out.ranks_per_node - 1) / out.ranks_per_node;
  return out;
}

std::string_view to_string(ParallelGroup group) {
  switch (group) {
    case ParallelGroup::kTp: return "tp";
    case ParallelGroup::kCp: return "cp";
    case ParallelGroup::kEp: return "ep";
    case ParallelGroup::kDp: return "dp";
    case ParallelGroup::kPp: return "pp";
  }
  return "?";
}

RankCoordinates rank_coordinates(int rank, const ParallelLayout& l) {
  RankCoordinates c;
  c.tp = rank % l.tp;
  c.cp = rank / l.tp % l.cp;
  c.dp = rank / (l.tp * l.cp) % l.dp;
  c.pp = rank / (l.tp * l.cp * l.dp);
  const int in_stage = rank % (l.tp * l.cp * l.dp);
  c.etp = in_stage % l.etp;
  c.ep = in_stage / l.etp % l.ep;
  c.edp = in_stage / (l.etp * l.ep);
  return c;
}

int rank_at(const RankCoordinates& c, const ParallelLayout& l) {
  return c.tp + l.tp * (c.cp + l.cp * (c.dp + l.dp * c.pp));
}

GroupMembership group_membership(int rank, const ParallelLayout& l, ParallelGroup group) {
  const RankCoordinates c = rank_coordinates(rank, l);
  // The color enumerates the coordinates the group does not span; the key is
  // the one it does.
  switch (group) {
    case ParallelGroup::kTp: return {c.cp + l.cp * (c.dp + l.dp * c.pp), c.tp};
    case ParallelGroup::kCp: return {c.tp + l.tp * (c.dp + l.dp * c.pp), c.cp};
    case ParallelGroup::kDp: return {c.tp + l.tp * (c.cp + l.cp * c.pp), c.dp};
    case ParallelGroup::kPp: return {c.tp + l.tp * (c.cp + l.cp * c.dp), c.pp};
    case ParallelGroup::kEp: return {c.etp + l.etp * (c.edp + l.expert_dp() * c.pp), c.ep};
  }
  return {};
}

}  // namespace sextant::sim
