// How a trainer's flat arrays are cut over the ranks, as a checkpoint records
// it (engine/checkpoint/checkpoint_sharding.h): one CheckpointSharding per
// pipeline stage (one for pp = 1).
#pragma once

#include <cstddef>
#include <vector>

#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/trainer.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::training {

/// Every stage's sharding under the trainer's layout: at pp = 1 the trainer's
/// own (its one chunk's parameter layout, flat length and buckets); with a
/// pipeline, each stage's from the layout (pipeline_sharding), checked against
/// this rank's trainer — the same tensors in its order and, under ZeRO-1, its
/// own buckets — std::logic_error when they differ (a programming error: the
/// checkpoint would describe other arrays than the ranks hold). A context-parallel
/// layout gives the sharding of its dp·cp replicas (cp folds into dp:
/// engine/checkpoint/checkpoint_of_run.cc, checkpoint_layout_of).
std::vector<checkpoint::CheckpointSharding> trainer_sharding(const Trainer& trainer, const sim::ModelConfig& model,
                                                             std::size_t bucket_elements);

}  // namespace sextant::engine::training
