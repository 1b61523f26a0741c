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

}  // namespace sextant::sim
