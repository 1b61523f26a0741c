// The one metadata file of a checkpoint (DIR/step-<N>/metadata.json): what
// was saved, by which run, and how to check each rank's shard. JSON, so a
// person (or jq) can read it:
//
//   {"format": "sextant-checkpoint", "format_version": 1, "step": 3,
//    "data_batches": 3, "seed": 1234,
//    "model": {"name": "gpt-1.3b", "num_layers": 24, "hidden_size": 2048, ...,
//              "parameters_per_rank": 1315575808},
//    "layout": {"tp": 1, "dp": 2, "zero": 1}, "world_size": 2,
//    "lr_schedule": {"max_lr": 3e-4, "min_lr": 3e-5, "warmup_steps": 10, "decay_steps": 100},
//    "files": [{"rank": 0, "name": "rank-00000.bin", "bytes": 123, "crc32": "1a2b3c4d"}, ...],
//    "sharding": {"flat_elements": 1315577856,
//                 "tensors": [{"name": "layers.0.qkv_weight", "shape": [6144, 2048], "offset": 4096,
//                              "split_dim": 0, "blocks": [2048, 2048, 2048]}, ...],
//                 "optimizer_shards": [[[0, 8000, 0], [40000000, 8000, 8000], ...], ...]}}
//
// `sharding` (checkpoint_sharding.h; format version 2) describes how the
// arrays are cut over the ranks — each tensor's whole shape, its split over
// tp and its offset in a rank's flat buffers, and each dp rank's optimizer
// shard as [begin, elements, shard_offset] triples — so that the checkpoint
// loads into another tp/dp/zero layout (reshard_plan.h). Version 1 files
// (without it) still load into their own layout.
//
// A pipeline-parallel checkpoint (pp > 1; format version 3) has, instead of
// `sharding`, one per stage, the stage's model chunks first:
//
//   "layout": {"tp": 1, "dp": 1, "zero": 0, "pp": 2, "vpp": 1},
//   "stages": [{"chunks": [{"first_layer": 0, "num_layers": 12, "embedding": true, "loss": false}],
//               "flat_elements": ..., "tensors": [...], "optimizer_shards": []}, ...]
//
// so each stage's files are described by the whole model's tensor names and
// load into another pp, vpp or split by name. Files of pp = 1 are still
// written as version 2; versions 1 and 2 load as before.
//
// A run with context parallelism records "cp" in its layout too (absent: 1):
// its files are numbered in the rank order tp-cp-dp-pp, every rank's own.
//
// `step` is the trainer's updates done; `data_batches` the global batches
// the run has drawn from its data stream (one per step, skipped steps too),
// which the resumed run draws again and discards, so that it continues at
// the same place of the same seeded stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_sharding.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::checkpoint {

inline constexpr int kFormatVersion = 3;
inline constexpr int kOldestReadableFormatVersion = 1;  // read, then refused by layout_mismatch

/// What must match for a checkpoint's weights to fit a run's model.
struct CheckpointModel {
  std::string name;
  std::int64_t num_layers = 0, hidden_size = 0, ffn_hidden_size = 0, num_attention_heads = 0,
               num_query_groups = 0, kv_channels = 0, vocab_size = 0, seq_length = 0;
  std::int64_t parameters_per_rank = 0;  // ParameterLayout::parameter_count of one rank's shard
  bool operator==(const CheckpointModel&) const = default;
};

/// The parallel sizes of the saving run. Its ranks are numbered in the rank
/// order tp-cp-dp-pp of sim/comm/group_placement.h (rank_order_layout).
struct CheckpointLayout {
  int tp = 1, dp = 1, zero = 0;
  int pp = 1;   // pipeline stages (the tensors of a stage's layers only); absent in version 1: 1
  int vpp = 1;  // model chunks per stage; absent before version 3: 1
  /// Context-parallel ranks: they split the sequence, not the arrays, so the
  /// ranks that differ only in cp hold the same shard. Written only when > 1.
  int cp = 1;
  /// Expert-parallel ranks (folded over dp): each holds its experts' rows of
  /// the expert tensors (TensorSharding::expert). Written only when > 1.
  int ep = 1;
  bool operator==(const CheckpointLayout&) const = default;
};

/// `layout`'s sizes as a sim::ParallelLayout, for sim::rank_coordinates and
/// sim::rank_at: the one rank order of the project.
sim::ParallelLayout rank_order_layout(const CheckpointLayout& layout);

struct CheckpointLrSchedule {
  double max_lr = 0, min_lr = 0;
  int warmup_steps = 0, decay_steps = 0;
  bool operator==(const CheckpointLrSchedule&) const = default;
};

struct ShardFileEntry {
  int rank = 0;
  std::string name;  // in the step folder
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
  bool operator==(const ShardFileEntry&) const = default;
};

struct CheckpointMetadata {
  /// As read; to_json writes 3 with stage shardings, 2 with a known sharding, else 1.
  int format_version = kFormatVersion;
  std::int64_t step = 0;
  std::int64_t data_batches = 0;
  std::uint64_t seed = 0;
  CheckpointModel model;
  CheckpointLayout layout;
  int world_size = 1;
  CheckpointLrSchedule lr_schedule;
  std::vector<ShardFileEntry> files;  // one per rank, by rank
  CheckpointSharding sharding;        // pp = 1; unknown (empty) in version 1
  std::vector<CheckpointSharding> stages;  // pp > 1: stage s's ranks' (version 3)
  bool operator==(const CheckpointMetadata&) const = default;
};

/// The sharding of the files of pipeline stage `stage` (0 when pp = 1).
const CheckpointSharding& stage_sharding(const CheckpointMetadata& metadata, int stage);
/// Every saved stage's sharding, by stage: `stages`, or with pp = 1 `sharding` alone.
std::vector<CheckpointSharding> saved_stage_shardings(const CheckpointMetadata& metadata);
/// Whether the metadata describes how its arrays are cut (version >= 2).
bool sharding_known(const CheckpointMetadata& metadata);

/// Rank r's shard file name: "rank-00003.bin".
std::string shard_file_name(int rank);

std::string to_json(const CheckpointMetadata& metadata);
/// Parses `text` read from `file`. Throws sim::ConfigError naming `file` and the
/// key that is missing or wrong, or the format version it does not read.
CheckpointMetadata parse_metadata(const std::string& text, const std::string& file);
/// Reads and parses `file` (ConfigError when missing or damaged).
CheckpointMetadata read_metadata(const std::string& file);

/// Why a checkpoint cannot be loaded into a run; empty when it can. The
/// layout: another tp, dp, zero, pp or vpp loads when the checkpoint
/// describes its sharding (`reshardable`: version >= 2); a version-1 one is
/// refused in every layout ("checkpoint has tp=2, dp=1, zero=0; this run has
/// tp=1, dp=2, zero=0: ..."): it does not say where its tensors lie, and the
/// engine's order has changed since. The model: each field that
/// differs, "checkpoint is of model 'a' (hidden_size 128); this run's is
/// 'b' (hidden_size 256)" (parameters_per_rank only between equal tp). The
/// learning-rate schedule likewise.
std::string layout_mismatch(const CheckpointLayout& saved, const CheckpointLayout& run, bool reshardable);
std::string model_mismatch(const CheckpointModel& saved, const CheckpointModel& run);
std::string lr_schedule_mismatch(const CheckpointLrSchedule& saved, const CheckpointLrSchedule& run);

}  // namespace sextant::engine::checkpoint
