// Compute time of one transformer layer, and of the output layer, for one
// micro-batch on one GPU: the GEMMs by shape, the attention core, and the
// memory-bound element-wise kernels by bytes moved.
#pragma once

#include "sim/compute/device_rates.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct PassTime {
  double forward_s = 0;
  double backward_s = 0;
  /// Parts of forward_s, kept for recomputation and communication overlap.
  double attention_core_forward_s = 0;  // what selective recomputation runs again
  double gemm_forward_s = 0;            // tensor-parallel GEMMs (hide TP comm)
  double gemm_backward_s = 0;
};

/// One transformer layer (dense or MoE) for one micro-batch, no recomputation.
PassTime layer_time(const ModelConfig& model, const ParallelLayout& layout,
                    const DeviceRates& rates, bool moe_layer);

/// Final norm, logits GEMM and vocabulary-parallel cross entropy (last stage),
/// and the embedding lookup (first stage), for one micro-batch.
PassTime output_layer_time(const ModelConfig& model, const ParallelLayout& layout,
                           const DeviceRates& rates);
PassTime embedding_time(const ModelConfig& model, const ParallelLayout& layout,
                        const DeviceRates& rates);

}  // namespace sextant::sim
