// How a checkpoint's arrays are cut over its ranks, in terms that do not
// depend on the layout: each tensor's name, its whole shape and how tensor
// parallelism splits it, where a rank's shard of it lies in the rank's flat
// buffers, and which flat ranges each data-parallel rank's fp32 optimizer
// shard holds (ZeRO-1). The metadata carries it (checkpoint_metadata.h), so a
// checkpoint saved with one tp/dp/zero layout loads into another
// (reshard_plan.h).
//
// With a pipeline (pp > 1) each stage's ranks hold other tensors: a stage has
// a sharding of its own (pipeline_stage_sharding), naming its model chunks'
// layers and its tensors by the whole model's names ("layers.5.qkv_weight"),
// so that a tensor is found in whichever stage holds it under another split.
//
// Ranks: world rank = tp_rank + tp·dp_rank + tp·dp·stage (the tp-dp-pp order
// of engine/comm/parallel_groups.h). Every tp rank's flat buffers have the same
// element layout (the same tensors, each its shard's shape), so one list of
// tensors describes them all; all dp ranks of one tp rank hold the same bf16
// weights, and without ZeRO the same fp32 master weights and Adam moments —
// except the experts' tensors under expert parallelism (ep > 1, folded over
// dp: dp rank d is ep rank d mod ep), which each ep rank holds its own rows of.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/gradient_bucket_plan.h"
#include "engine/model/parameter_layout.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::checkpoint {

struct TensorSharding {
  std::string name;
  std::int64_t rows = 0, cols = 0;  // the whole tensor's: all tp ranks' shards together
  std::uint64_t offset = 0;         // of a rank's shard in its flat buffers (elements)
  /// Split over tp along 0 (rows) or 1 (columns); -1: every tp rank holds all of it.
  int split_dim = -1;
  /// The whole tensor's blocks along split_dim (they sum to rows or cols):
  /// tp rank r holds [start_k + r·blocks[k]/tp, +blocks[k]/tp) of each
  /// (ParameterTensor::tp_blocks, whole instead of per rank).
  std::vector<std::int64_t> blocks;
  /// An expert tensor (ParameterTensor::expert): its rows, all experts', split
  /// over ep; ep rank r holds [r·rows/ep, +rows/ep) (tp = 1 with experts).
  bool expert = false;
  bool operator==(const TensorSharding&) const = default;
};

/// A piece of a dp rank's fp32 optimizer shard (master weights, Adam m and v):
/// flat elements [begin, begin + elements) at shard_offset in the shard.
/// `expert`: a piece of expert tensors (ep > 1), in the rank's own flat
/// buffers, which hold its ep rank's experts (dp rank d: ep rank d mod ep);
/// the expert buckets are sharded over the ep rank's expert-dp group (dp / ep
/// ranks, dp rank d its member d / ep), the rest over all dp ranks.
struct OptimizerRange {
  std::uint64_t begin = 0, elements = 0, shard_offset = 0;
  bool expert = false;
  bool operator==(const OptimizerRange&) const = default;
};

/// One model chunk of a pipeline stage (sim::ChunkLayers): its transformer
/// layers [first_layer, first_layer + num_layers) and whether it holds the
/// embedding and the loss (final norm and output layer, or a tied copy of wte).
struct ChunkParts {
  int first_layer = 0, num_layers = 0;
  bool embedding = false, loss = false;
  bool operator==(const ChunkParts&) const = default;
};

struct CheckpointSharding {
  /// Elements of each rank's flat bf16 weights (padding included), and of its
  /// fp32 arrays without ZeRO.
  std::uint64_t flat_elements = 0;
  std::vector<TensorSharding> tensors;
  /// With ZeRO-1 (zero = 1, dp > 1): dp rank d's shard is optimizer_shards[d],
  /// the same on every tp rank. Empty: every rank holds all flat_elements.
  std::vector<std::vector<OptimizerRange>> optimizer_shards;
  /// A pipeline stage's model chunks in the order of its flat buffers; empty:
  /// the whole model (pp = 1).
  std::vector<ChunkParts> chunks;
  /// False for a checkpoint written before the metadata described it (format
  /// version 1): it loads into its own layout only.
  bool known() const { return !tensors.empty(); }
  bool operator==(const CheckpointSharding&) const = default;
};

/// The sharding of a trainer: `layout` is one tp rank's (ParameterLayout of
/// the rank's shard shape), `flat_elements` its buffers' length, `buckets` the
/// data-parallel buckets (empty at dp = 1). With `distributed_optimizer`, dp
/// rank d owns block d of each bucket, [begin + d·elements/dp, +elements/dp),
/// back to back in its shard (engine/data_parallel/distributed_optimizer.h).
/// Throws std::logic_error for a tensor split over tp whose split dimension
/// and blocks the layout does not give (a programming error).
/// `ep`: the ranks the experts' tensors are split over (their whole rows are ep
/// times the layout's); with ep > 1 and the distributed optimizer the buckets
/// hold one kind of tensor each (split_at_expert_tensors; std::logic_error
/// otherwise) and the experts' are sharded over the expert-dp group.
CheckpointSharding sharding_of(const ParameterLayout& layout, int tp, std::uint64_t flat_elements,
                               const std::vector<GradientBucketRange>& buckets, int dp,
                               bool distributed_optimizer, int ep = 1);

/// Dp rank d's ZeRO-1 shard: block d of each bucket, back to back; with
/// `expert` (one flag per bucket, ep > 1) an expert bucket's block d / ep of
/// dp / ep blocks (the expert-dp group's), its ranges marked expert.
std::vector<std::vector<OptimizerRange>> optimizer_shards_of(const std::vector<GradientBucketRange>& buckets, int dp,
                                                             int ep = 1, const std::vector<bool>& expert = {});

/// Which of `buckets` (of a stage's buffer: `chunks` back to back) hold expert
/// tensors; std::logic_error for a bucket holding both kinds.
std::vector<bool> expert_buckets_of(const std::vector<GradientBucketRange>& buckets,
                                    const std::vector<ParameterLayout>& chunks);

/// The sharding of pipeline stage `stage`'s ranks under `layout` (pp > 1):
/// its chunks' ParameterLayouts back to back in chunk order, each of the
/// rank's tp shard shape (transformer_shape_of(model, layout)) with the
/// chunk's layers and parts, as the Trainer lays out its flat buffers;
/// with the distributed optimizer (zero >= 1, dp > 1) padded to 8·dp and
/// sharded by the stage's gradient buckets (stage_gradient_bucket_ranges with
/// `bucket_elements`, as the Trainer makes them). Throws std::invalid_argument
/// when the layout's split knobs do not split the model
/// (sim::check_pipeline_split).
CheckpointSharding pipeline_stage_sharding(const sim::ModelConfig& model, const sim::ParallelLayout& layout, int stage,
                                           std::size_t bucket_elements = kDefaultBucketElements);

/// Every stage's, by stage.
std::vector<CheckpointSharding> pipeline_sharding(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                                                  std::size_t bucket_elements = kDefaultBucketElements);

}  // namespace sextant::engine::checkpoint
