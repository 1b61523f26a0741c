#include "engine/checkpoint/checkpoint_sharding.h"

#include <stdexcept>

#include "engine/model/transformer_shape.h"
#include "sim/core/pipeline_split.h"

namespace sextant::engine::checkpoint {

CheckpointSharding sharding_of(const ParameterLayout& layout, int tp, std::uint64_t flat_elements,
                               const std::vector<GradientBucketRange>& buckets, int dp,
                               bool distributed_optimizer, int ep) {
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
    if (t.expert) {
      e.expert = true;
      e.rows *= ep;
    }
    s.tensors.push_back(std::move(e));
  }
  if (distributed_optimizer && dp > 1)
    s.optimizer_shards =
        optimizer_shards_of(buckets, dp, ep, ep > 1 ? expert_buckets_of(buckets, {layout}) : std::vector<bool>{});
  return s;
}

std::vector<std::vector<OptimizerRange>> optimizer_shards_of(const std::vector<GradientBucketRange>& buckets, int dp,
                                                             int ep, const std::vector<bool>& expert) {
  if (!expert.empty() && expert.size() != buckets.size())
    throw std::logic_error("optimizer_shards_of: " + std::to_string(expert.size()) + " expert flags for " +
                           std::to_string(buckets.size()) + " buckets");
  std::vector<std::vector<OptimizerRange>> shards(static_cast<std::size_t>(dp));
  for (int d = 0; d < dp; ++d) {
    std::uint64_t shard_offset = 0;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const GradientBucketRange& b = buckets[i];
      const bool experts = !expert.empty() && expert[i];
      // The bucket's group: dp, or the ep rank's expert-dp ranks d mod ep, + ep, ... (member d / ep).
      const int ranks = experts ? dp / ep : dp, member = experts ? d / ep : d;
      const std::uint64_t block = b.elements / static_cast<std::uint64_t>(ranks);
      shards[static_cast<std::size_t>(d)].push_back(
          {b.begin + static_cast<std::uint64_t>(member) * block, block, shard_offset, experts});
      shard_offset += block;
    }
  }
  return shards;
}

std::vector<bool> expert_buckets_of(const std::vector<GradientBucketRange>& buckets,
                                    const std::vector<ParameterLayout>& chunks) {
  std::vector<ElementRange> ranges;
  for (const GradientBucketRange& b : buckets) ranges.emplace_back(b.begin, b.begin + b.elements);
  ExpertSplitRanges split = split_at_expert_tensors(ranges, chunks);
  if (split.ranges != ranges)
    throw std::logic_error("expert_buckets_of: a bucket holds expert tensors and others (ep > 1 splits them)");
  return split.expert;
}

CheckpointSharding pipeline_stage_sharding(const sim::ModelConfig& model, const sim::ParallelLayout& layout, int stage,
                                           std::size_t bucket_elements) {
  if (const sim::SplitProblem p = sim::check_pipeline_split(model, layout); p != sim::SplitProblem::kNone)
    throw std::invalid_argument("pipeline_stage_sharding: " + sim::split_problem_message(p, model, layout));
  if (stage < 0 || stage >= layout.pp)
    throw std::invalid_argument("pipeline_stage_sharding: stage " + std::to_string(stage) + " of pp = " +
                                std::to_string(layout.pp));
  const sim::PipelineSplit split = sim::pipeline_split(model, layout);
  const TransformerShape shape = transformer_shape_of(model, layout);
  CheckpointSharding s;
  std::vector<ParameterLayout> chunks;
  for (int c = 0; c < split.vpp(); ++c) {
    const sim::ChunkLayers& held = split.chunk(stage, c);
    TransformerShape chunk_shape = shape;
    chunk_shape.num_layers = held.num_layers;
    const ParameterLayout& chunk = chunks.emplace_back(chunk_shape, StageParts{held.first_layer, held.embedding, held.loss});
    CheckpointSharding part = sharding_of(chunk, layout.tp, chunk.total_elements(), {}, 1, false, layout.ep);
    for (TensorSharding& t : part.tensors) {
      t.offset += s.flat_elements;
      s.tensors.push_back(std::move(t));
    }
    s.flat_elements += chunk.total_elements();
    s.chunks.push_back({held.first_layer, held.num_layers, held.embedding, held.loss});
  }
  if (layout.zero >= 1 && layout.dp > 1) {
    // The Trainer's distributed optimizer: the stage's buckets, padded to 8·dp
    // (with ep > 1 cut where the tensors change kind: Trainer::plan_gradient_buckets_of_stage).
    const std::size_t multiple = sharded_bucket_multiple(layout.dp);
    s.flat_elements = round_up_elements(s.flat_elements, multiple);
    std::vector<ElementRange> ranges = stage_gradient_bucket_ranges(chunks, stage == 0, bucket_elements, multiple);
    std::vector<bool> expert;
    if (layout.ep > 1) {
      ExpertSplitRanges split = split_at_expert_tensors(ranges, chunks);
      ranges = std::move(split.ranges);
      expert = std::move(split.expert);
    }
    std::vector<GradientBucketRange> buckets;
    for (const auto& [begin, end] : ranges) buckets.push_back({begin, end - begin, 0});
    s.optimizer_shards = optimizer_shards_of(buckets, layout.dp, layout.ep, expert);
  }
  return s;
}

std::vector<CheckpointSharding> pipeline_sharding(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                                                  std::size_t bucket_elements) {
  std::vector<CheckpointSharding> stages;
  for (int s = 0; s < layout.pp; ++s) stages.push_back(pipeline_stage_sharding(model, layout, s, bucket_elements));
  return stages;
}

}  // namespace sextant::engine::checkpoint
