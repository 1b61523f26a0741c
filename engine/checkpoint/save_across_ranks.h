// One checkpoint saved by every rank of a run together: rank 0 opens the
// step's tmp folder, every rank writes its shard, rank 0 commits (metadata,
// rename, `latest`, pruning) — checkpoint_directory.h's protocol, with a
// barrier between the steps that also tells every rank whether one failed.
#pragma once

#include <functional>
#include <string>

#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/trainer_state.h"

namespace sextant::engine::checkpoint {

/// Saves world rank `world_rank`'s `state` as its part of the checkpoint of
/// `metadata.step` in `root`, keeping the newest `keep` checkpoints.
/// `barrier(failed)` must return whether any rank of the world passed true
/// (and wait for all): a rank that cannot write makes every rank throw
/// instead of one hanging — the failing rank its own error, the others a
/// sim::ConfigError naming `root` (key --save). Returns the step folder (on
/// every rank).
std::string save_across_ranks(const std::string& root, int keep, int world_rank, const CheckpointMetadata& metadata,
                              const TrainerState& state, const std::function<bool(bool failed)>& barrier);

}  // namespace sextant::engine::checkpoint
