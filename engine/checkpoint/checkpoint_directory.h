// A folder of checkpoints, saved atomically and kept to the last K:
//
//   DIR/step-3/metadata.json, rank-00000.bin, rank-00001.bin, ...
//   DIR/step-6/...
//   DIR/latest            "step-6": the last complete checkpoint
//
// A save writes every shard into DIR/tmp-<step>/ (each fsynced), then
// commit_save writes the metadata there (fsynced), fsyncs the folder, renames
// it to DIR/step-<step>/, fsyncs DIR, and only then replaces DIR/latest
// (written to latest.tmp, fsynced, renamed). A crash at any point leaves
// `latest` naming the previous complete checkpoint; a leftover tmp-<step>/ is
// removed by the next save of that step or by the pruning of a later one.
//
// Several ranks, several processes: rank 0 calls begin_save, every rank
// writes its shard (write_rank_shard), and after all have (a barrier), rank 0
// calls commit_save. DIR must be one folder every rank sees (a shared file
// system across nodes).
#pragma once

#include <cstdint>
#include <string>

#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/reshard_plan.h"
#include "engine/checkpoint/trainer_state.h"

namespace sextant::engine::checkpoint {

/// "DIR/tmp-<step>", emptied and created (DIR too, when missing).
std::string begin_save(const std::string& root, std::int64_t step);

/// Writes rank `rank`'s shard into the folder begin_save made.
void write_rank_shard(const std::string& root, std::int64_t step, int rank, const TrainerState& state);

/// Completes the save of `metadata.step`: fills each file entry's bytes and
/// CRC-32 from the shard files in tmp-<step> (all world_size of them must be
/// there), writes metadata.json, renames the folder to step-<step>, points
/// `latest` at it and removes all but the newest `keep` (>= 1) step folders
/// and any other tmp- folder. Returns the step folder's path.
std::string commit_save(const std::string& root, CheckpointMetadata metadata, int keep);

/// A checkpoint opened for loading: its step folder and metadata.
struct OpenedCheckpoint {
  std::string folder;
  CheckpointMetadata metadata;
};

/// `path` is a step folder (holding metadata.json) or a checkpoint folder
/// (holding `latest`). Throws sim::ConfigError naming the path and what is
/// missing or damaged.
OpenedCheckpoint open_checkpoint(const std::string& path);

/// Rank `rank`'s state, its size and checksum checked against the metadata.
TrainerState read_rank_state(const OpenedCheckpoint& checkpoint, int rank);

/// A loading rank's state assembled from the saved ranks' shards as `plan`
/// says (a checkpoint of another layout: reshard_plan.h). Each shard read is
/// checked like read_rank_state's, and must hold the metadata's step.
TrainerState read_resharded_state(const OpenedCheckpoint& checkpoint, const ReshardPlan& plan);

}  // namespace sextant::engine::checkpoint
