// Where the GPUs of one communication group sit: how many share a node.
//
// Ranks are numbered in the order tp-cp-ep-dp-pp (tp fastest), and a node
// holds gpus_per_node consecutive ranks. A group whose members are `stride`
// ranks apart therefore has gpus_per_node/stride members per node (at least 1)
// and spans size/(members per node) nodes (Megatron-Core parallel_state).
#pragma once

namespace sextant::sim {

struct GroupPlacement {
  int size = 1;            // ranks in the group
  int ranks_per_node = 1;  // of those, how many share each node
  int nodes = 1;           // nodes the group spans
  bool crosses_nodes() const { return nodes > 1; }
};

GroupPlacement place_group(int size, int stride, int gpus_per_node);

}  // namespace sextant::sim
