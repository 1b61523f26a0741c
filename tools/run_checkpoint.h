// `sextant run --save / --load`: what a checkpoint records of the run, the
// check that a checkpoint fits this run (before any GPU is touched), and the
// save itself across the run's ranks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_metadata.h"
#include "tools/run_settings.h"

namespace sextant::tools {

/// The arrays of a run's ranks, by pipeline stage: one sharding (pp = 1: the
/// trainer's, engine::checkpoint::sharding_of) or one per stage
/// (engine::checkpoint::pipeline_sharding).
using RunSharding = std::vector<engine::checkpoint::CheckpointSharding>;

/// The metadata of a checkpoint of `run` after `steps_done` updates and
/// `data_batches` global batches drawn, its arrays cut as `sharding` says;
/// the files are filled in by commit_save.
engine::checkpoint::CheckpointMetadata checkpoint_metadata_of(const PreparedRun& run, std::int64_t steps_done,
                                                              std::int64_t data_batches, const RunSharding& sharding);

/// Throws sim::ConfigError naming the checkpoint's metadata file and what
/// differs when `checkpoint` was saved by a run of another model,
/// learning-rate schedule or seed (the data order), or past --steps, or of
/// another layout that it cannot be loaded into (a version-1 checkpoint of
/// another layout, or the distributed optimizer with pp > 1). Another tp, dp,
/// zero, pp, vpp or pipeline split is resharded on load (load_rank_state).
void check_checkpoint_fits(const engine::checkpoint::OpenedCheckpoint& checkpoint, const PreparedRun& run);

/// Whether `checkpoint`'s ranks hold exactly what this run's do (the same
/// layout and, with pp > 1, the same stage split): each rank reads its own
/// shard. Otherwise load_rank_state reshards.
bool same_arrays(const engine::checkpoint::OpenedCheckpoint& checkpoint, const PreparedRun& run,
                 const RunSharding& sharding);

/// This rank's state from `checkpoint`: its own shard, bit for bit, when
/// same_arrays; else assembled from the saved shards for this run's layout
/// and its stage's `sharding` (engine/checkpoint/reshard_plan.h). Throws
/// sim::ConfigError naming the file and what does not fit.
engine::checkpoint::TrainerState load_rank_state(const engine::checkpoint::OpenedCheckpoint& checkpoint,
                                                 const PreparedRun& run, const RunSharding& sharding);

/// Saves this rank's `state` as part of the checkpoint of `metadata.step`:
/// rank 0 opens the step's tmp folder, every rank writes its shard, rank 0
/// commits (metadata, rename, `latest`, pruning to --keep). `barrier(failed)`
/// must return whether any rank of the world passed true (and wait for all):
/// a rank that cannot write makes every rank throw instead of one hanging.
/// Returns the step folder (on every rank).
std::string save_checkpoint(const PreparedRun& run, const engine::checkpoint::CheckpointMetadata& metadata,
                            const engine::checkpoint::TrainerState& state,
                            const std::function<bool(bool failed)>& barrier);

}  // namespace sextant::tools
