// Which gradients are reduced together: Megatron-Core's DDP buckets.
//
// Gradients are laid out in reverse order of the parameters (the last layers'
// gradients are ready first in the backward pass) and cut into buckets of about
// `bucket_params` parameters; a bucket is reduced as soon as its last gradient
// of the iteration is ready (--overlap-grad-reduce). With several model chunks
// per stage only the first chunk is cut into buckets: the others' reductions
// hide behind the remaining chunks' backward anyway (Megatron-LM training.py,
// get_model: disable_bucketing for model chunks after the first).
#pragma once

#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

/// Megatron-Core DDP's default bucket size (--ddp-bucket-size: 40M parameters).
inline constexpr double kDefaultBucketParams = 40e6;

/// The buckets of stage `stage`, in the order their reductions are issued: the
/// last chunk's first, and within a chunk from its last layer down. Layers are
/// not split across buckets. Parameter counts are what one GPU holds
/// (stage_params_per_gpu summed over the stage's buckets).
std::vector<GradientBucket> stage_gradient_buckets(const ModelConfig& model,
                                                   const ParallelLayout& layout,
                                                   const PlanShape& shape, int stage,
                                                   double bucket_params);

}  // namespace sextant::sim
