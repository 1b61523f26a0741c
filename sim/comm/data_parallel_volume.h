// Bytes one GPU sends for data-parallel synchronisation in one step: what the
// ZeRO stage moves, independent of how much of it overlaps compute. A ring
// collective over n ranks sends (n−1)/n of its buffer per pass (Patarasuk &
// Yuan 2009): an all-reduce two passes, a reduce-scatter or all-gather one.
//  - zero 0: all-reduce of the gradients once per step;
//  - zero 1: reduce-scatter of the gradients and all-gather of the bf16 weights;
//  - zero 2: the reduce-scatter every micro-batch, the all-gather once;
//  - zero 3: per micro-batch, the weights gathered for the forward and again for
//    the backward (the embedding's forward only) and the gradients reduce-scattered
//    (sim/comm/fsdp_behaviour.h), so at least zero 1's bytes.
// Dense weights over the dp·cp group, expert weights over the expert-data-parallel
// group; the stage holding most weights.
#pragma once

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

double data_parallel_bytes_per_step(const ModelConfig& model, const ParallelLayout& layout);

}  // namespace sextant::sim
