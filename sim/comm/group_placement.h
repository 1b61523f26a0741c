// Where the GPUs of one communication group sit: how many share a node.
//
// Ranks are numbered in the order tp-cp-ep-dp-pp (tp fastest), and a node
// holds gpus_per_node consecutive ranks. A group whose members are `stride`
// ranks apart therefore has gpus_per_node/stride members per node (at least 1)
// and spans size/(members per node) nodes (Megatron-Core parallel_state).
#pragma once

#include <string_view>

#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct GroupPlacement {
  int size = 1;            // ranks in the group
  int ranks_per_node = 1;  // of those, how many share each node
  int nodes = 1;           // nodes the group spans
  bool crosses_nodes() const { return nodes > 1; }
};

GroupPlacement place_group(int size, int stride, int gpus_per_node);

/// Where one global rank sits in each parallel dimension. Dense layers number
/// ranks tp-cp-dp-pp, tp fastest: rank = tp + tp_size·(cp + cp_size·(dp +
/// dp_size·pp)). Expert layers fold each stage's tp·cp·dp ranks as etp-ep-edp
/// (Megatron-Core RankGenerator, MoE parallel folding), so `ep` is the rank's
/// expert-parallel index and `edp`, `etp` its expert data/tensor indices.
struct RankCoordinates {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  int etp = 0, ep = 0, edp = 0;
};

/// The parallel dimensions a communicator group spans. kDpCp: the dp and cp
/// ranks together (what dense gradients are reduced over when cp > 1,
/// Megatron-Core's data_parallel_group with_context_parallel); kExpertTp,
/// kEp, kExpertDp: the expert layers' folding of a stage's tp·cp·dp ranks
/// (etp fastest, then ep, then expert-dp: expert parameters are reduced over
/// kExpertDp); kEmbedding: the first and the last pipeline stage of a pp group
/// (a tied word embedding's two copies; ranks of other stages belong to none).
enum class ParallelGroup { kTp, kCp, kEp, kDp, kPp, kDpCp, kExpertTp, kExpertDp, kEmbedding };
std::string_view to_string(ParallelGroup group);

/// Coordinates of `rank` (0 <= rank < layout.total_gpus()).
RankCoordinates rank_coordinates(int rank, const ParallelLayout& layout);
/// The rank at `coordinates`' tp, cp, dp and pp (the expert indices follow
/// from them): the inverse of rank_coordinates.
int rank_at(const RankCoordinates& coordinates, const ParallelLayout& layout);

/// Which group of kind `group` holds `rank`, and the rank's place in it: two
/// ranks share a group exactly when their `color` is equal, and `key` is the
/// rank's coordinate along the group (what ncclCommSplit takes). A rank in no
/// group of that kind (kEmbedding on a middle stage) has color kNoGroup.
struct GroupMembership {
  static constexpr int kNoGroup = -1;
  int color = 0;
  int key = 0;
  bool member() const { return color != kNoGroup; }
};
GroupMembership group_membership(int rank, const ParallelLayout& layout, ParallelGroup group);

}  // namespace sextant::sim
