// The routed experts' MLP of one MoE layer on one GPU, as Megatron-Core's
// GroupedMLP runs it (--moe-grouped-gemm): fc1 and fc2 as grouped GEMMs over
// the rank's local experts (grouped_gemm_time.h: per-expert tile padding and
// weight reads), the activation as one element-wise kernel over the routed rows.
#pragma once

#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "sim/core/model_config.h"

namespace sextant::sim {

/// Adds the experts' fc1, activation and fc2 for `routed_rows` token copies
/// this GPU's `local_experts` receive (spread evenly in expectation), each
/// expert `ffn` wide split `etp` ways.
void add_expert_mlp(PassTime& t, const ModelConfig& model, double routed_rows, double ffn,
                    double etp, double local_experts, const DeviceRates& rates);

}  // namespace sextant::sim
