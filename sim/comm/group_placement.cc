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
    case ParallelGroup::kDpCp: return "dp_cp";
    case ParallelGroup::kExpertTp: return "expert_tp";
    case ParallelGroup::kExpertDp: return "expert_dp";
    case ParallelGroup::kEmbedding: return "embedding";
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
    // dp and cp together: the key runs cp fastest, as the ranks do.
    case ParallelGroup::kDpCp: return {c.tp + l.tp * c.pp, c.cp + l.cp * c.dp};
    case ParallelGroup::kExpertTp: return {c.ep + l.ep * (c.edp + l.expert_dp() * c.pp), c.etp};
    case ParallelGroup::kExpertDp: return {c.etp + l.etp * (c.ep + l.ep * c.pp), c.edp};
    case ParallelGroup::kEmbedding: {
      // Megatron-Core's embedding group: pp ranks 0 and pp - 1 of each pipeline
      // (parallel_state.initialize_model_parallel, default_embedding_ranks).
      if (c.pp != 0 && c.pp != l.pp - 1) return {GroupMembership::kNoGroup, 0};
      return {c.tp + l.tp * (c.cp + l.cp * c.dp), c.pp == 0 ? 0 : 1};
    }
  }
  return {};
}

}  // namespace sextant::sim
