#include "engine/checkpoint/checkpoint_sharding.h"

#include <stdexcept>

namespace sextant::engine::checkpoint {

CheckpointSharding sharding_of(const ParameterLayout& layout, int tp, std::uint64_t flat_elements,
                               const std::vector<GradientBucketRange>& buckets, int dp,
                               bool distributed_optimizer) {
  CheckpointSharding s;
  s.flat_elements = flat_elements;
  for (const ParameterTensor& t : layout.tensors()) {
    TensorSharding e;
    e.name = t.name;
    e.rows = t.rows;
    e.cols = t.cols;
    e.offset = t.offset;
    if (t.split_over_tp) {
      if ((t.tp_split_dim != 0 && t.tp_split_dim != 1) || t.tp_blocks.empty())
        throw std::logic_error("sharding_of: tensor '" + t.name +
                               "' is split over tp without its dimension and blocks (ParameterLayout::split)");
      e.split_dim = t.tp_split_dim;
      (e.split_dim == 0 ? e.rows : e.cols) *= tp;
      for (const std::int64_t b : t.tp_blocks) e.blocks.push_back(b * tp);
    }
    s.tensors.push_back(std::move(e));
  }
  if (distributed_optimizer && dp > 1) {
    s.optimizer_shards.resize(static_cast<std::size_t>(dp));
    for (int d = 0; d < dp; ++d) {
      std::uint64_t shard_offset = 0;
      for (const GradientBucketRange& b : buckets) {
        const std::uint64_t block = b.elements / static_cast<std::uint64_t>(dp);
        s.optimizer_shards[static_cast<std::size_t>(d)].push_back(
            {b.begin + static_cast<std::uint64_t>(d) * block, block, shard_offset});
        shard_offset += block;
      }
    }
  }
  return s;
}

}  // namespace sextant::engine::checkpoint
