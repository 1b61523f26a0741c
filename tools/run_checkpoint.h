// `sextant run --save / --load`: the prepared run handed to the checkpoint
// library (engine/checkpoint/checkpoint_of_run.h, save_across_ranks.h), which
// holds what a checkpoint records of a run, the check that one fits, the load
// of a rank's state and the save across the ranks.
#pragma once

#include <functional>
#include <string>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/checkpoint_of_run.h"
#include "tools/run_settings.h"

namespace sextant::tools {

using RunSharding = engine::checkpoint::RunSharding;

/// What the checkpoint library needs to know of `run`.
engine::checkpoint::RunDescription checkpoint_run_of(const PreparedRun& run);

/// engine::checkpoint::checkpoint_metadata_of for `run`.
engine::checkpoint::CheckpointMetadata checkpoint_metadata_of(const PreparedRun& run, std::int64_t steps_done,
                                                              std::int64_t data_batches, const RunSharding& sharding);

/// engine::checkpoint::check_checkpoint_fits for `run`.
void check_checkpoint_fits(const engine::checkpoint::OpenedCheckpoint& checkpoint, const PreparedRun& run);

/// engine::checkpoint::same_arrays for `run`'s layout.
bool same_arrays(const engine::checkpoint::OpenedCheckpoint& checkpoint, const PreparedRun& run,
                 const RunSharding& sharding);

/// engine::checkpoint::load_rank_state for `run`'s rank.
engine::checkpoint::TrainerState load_rank_state(const engine::checkpoint::OpenedCheckpoint& checkpoint,
                                                 const PreparedRun& run, const RunSharding& sharding);

/// engine::checkpoint::save_across_ranks into --save, keeping --keep, as `run`'s rank.
std::string save_checkpoint(const PreparedRun& run, const engine::checkpoint::CheckpointMetadata& metadata,
                            const engine::checkpoint::TrainerState& state,
                            const std::function<bool(bool failed)>& barrier);

}  // namespace sextant::tools
