// Which gradients are reduced together: Megatron-Core's DDP buckets
// (distributed_data_parallel.py, r0.8).
//
// Gradients are laid out in reverse order of the parameters (the last layers'
// gradients are ready first in the backward pass) and cut into buckets of
// max(40M, 1M·dp·cp) parameters, larger for large groups so each ring chunk
// stays bandwidth-bound; a bucket is reduced as soon as its last gradient of
// the iteration is ready (--overlap-grad-reduce). Megatron cuts only where
// that helps: without --overlap-grad-reduce everything is one bucket; on
// pipeline stages after the first (whose reductions are not on the critical
// path) and for model chunks after the first (their reductions hide behind
// the remaining chunks' backward) each chunk is one bucket. Under ZeRO-3 every
// layer, the embedding and the output layer are buckets of their own (FSDP units:
// Megatron-FSDP, FSDP2 and DeepSpeed stage 3 all wrap each transformer layer).
#pragma once

#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

/// Megatron-Core DDP's bucket size when --ddp-bucket-size is not given:
/// max(40M, 1M · the dp·cp group size) parameters.
double default_bucket_params(const ParallelLayout& layout);

/// The buckets of stage `stage`, in the order their reductions are issued: the
/// last chunk's first, and within a chunk from its last layer down. Layers are
/// not split across buckets; `bucket_params` applies where Megatron cuts
/// (first stage, first chunk, with --overlap-grad-reduce). Parameter counts
/// are what one GPU holds (stage_params_per_gpu summed over the stage's buckets).
std::vector<GradientBucket> stage_gradient_buckets(const ModelConfig& model,
                                                   const ParallelLayout& layout,
                                                   const PlanShape& shape, int stage,
                                                   double bucket_params);

}  // namespace sextant::sim
