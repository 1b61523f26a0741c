// A training run and its checkpoints: what a checkpoint records of the run,
// the check that a checkpoint fits a run (before any GPU is touched), and the
// state a rank of the run loads from one — its own shard, or pieces of the
// saved shards when the layouts differ (reshard_plan.h). Plain C++; `sextant
// run` (tools/run_checkpoint.h) calls it with the run it prepared.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/checkpoint/trainer_state.h"
#include "engine/model/lr_schedule.h"
#include "engine/model/transformer_shape.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::checkpoint {

/// What a checkpoint records of a run and is checked against.
struct RunDescription {
  sim::ModelConfig model;       // the model trained (its dimensions and name)
  TransformerShape shape;       // one rank's shard of it
  sim::ParallelLayout layout;
  LrSchedule lr;
  std::uint64_t seed = 0;       // of the weights and of the data order
  int steps = 0;                // the run's --steps, counted from the start of training
};

/// The arrays of a run's ranks, by pipeline stage: one sharding (pp = 1: the
/// trainer's, sharding_of) or one per stage (pipeline_sharding).
using RunSharding = std::vector<CheckpointSharding>;

/// The checkpoint's description of `layout`: tp, cp, dp, pp, vpp, and zero
/// (1 for the distributed optimizer where it shards something: dp > 1, or a
/// pipeline, where layout_mismatch refuses it).
CheckpointLayout checkpoint_layout_of(const sim::ParallelLayout& layout);

/// The metadata of a checkpoint of `run` after `steps_done` updates and
/// `data_batches` global batches drawn, its arrays cut as `sharding` says;
/// the files are filled in by commit_save.
CheckpointMetadata checkpoint_metadata_of(const RunDescription& run, std::int64_t steps_done,
                                          std::int64_t data_batches, const RunSharding& sharding);

/// Throws sim::ConfigError naming the checkpoint's metadata file and what
/// differs when `checkpoint` was saved by a run of another model,
/// learning-rate schedule or seed (the data order), or past --steps, or of
/// another layout that it cannot be loaded into (a version-1 checkpoint of
/// another layout). Another tp, cp, dp, zero, pp, vpp or pipeline split is
/// resharded on load (load_rank_state).
void check_checkpoint_fits(const OpenedCheckpoint& checkpoint, const RunDescription& run);

/// Whether `checkpoint`'s ranks hold exactly what the ranks of a run of
/// `layout` do (the same layout and, with pp > 1, the same stage split): each
/// rank reads its own shard. Otherwise load_rank_state reshards.
bool same_arrays(const OpenedCheckpoint& checkpoint, const sim::ParallelLayout& layout, const RunSharding& sharding);

/// The state of world rank `world_rank` of a run of `layout` from
/// `checkpoint`: its own shard, bit for bit, when same_arrays; else assembled
/// from the saved shards for its stage's sharding (reshard_plan.h). Throws
/// sim::ConfigError naming the file and what does not fit.
TrainerState load_rank_state(const OpenedCheckpoint& checkpoint, const sim::ParallelLayout& layout, int world_rank,
                             const RunSharding& sharding);

}  // namespace sextant::engine::checkpoint
