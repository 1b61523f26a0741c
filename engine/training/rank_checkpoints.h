// A rank's trainer to and from a checkpoint (engine/checkpoint/): what
// `sextant run --load` and `--save` do around the training loop.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "engine/checkpoint/checkpoint_of_run.h"
#include "engine/data/token_batches.h"
#include "engine/trainer.h"

namespace sextant::engine::training {

/// --load: the rank's part of `checkpoint` (resharded when the arrays differ:
/// load_rank_state) put into `trainer`, and `data` advanced past the batches
/// the saved run drew (the same seeded stream). Returns those batches. Throws
/// std::invalid_argument when the trainer's arrays do not take the state,
/// data::DataError from the data stream.
int restore_rank(Trainer& trainer, const checkpoint::OpenedCheckpoint& checkpoint, int world_rank,
                 const checkpoint::RunSharding& sharding, data::TokenBatches& data, std::size_t tokens_per_step);

/// Every rank of the run calls it together: the trainer's state, checked
/// against the sharding the metadata records (std::logic_error when they
/// differ), saved across the ranks into `root` keeping the last `keep`
/// (save_across_ranks, `barrier` its vote). Returns the checkpoint's folder.
std::string save_rank(const Trainer& trainer, const checkpoint::CheckpointMetadata& metadata,
                      const checkpoint::RunSharding& sharding, const std::string& root, int keep, int world_rank,
                      const std::function<bool(bool failed)>& barrier);

}  // namespace sextant::engine::training
