// The two kernel lists a layer can run, one per Software of the profile:
// Megatron-LM's as its published runs ran it (megatron_layer_kernels.cc) and
// our engine's (engine_layer_kernels.cc, read from engine/transformer/ on the
// engine's own shapes, sim/core/transformer_shape.h).
// layer_time.cc picks one; nothing else branches on the software.
#pragma once

#include "sim/compute/layer_time.h"

namespace sextant::sim {

PassTime megatron_layer_time(const ModelConfig& model, const ParallelLayout& layout,
                             const DeviceRates& rates, bool moe_layer);
PassTime megatron_output_layer_time(const ModelConfig& model, const ParallelLayout& layout,
                                    const DeviceRates& rates);
PassTime megatron_embedding_time(const ModelConfig& model, const ParallelLayout& layout,
                                 const DeviceRates& rates);
double megatron_optimizer_step_time_s(double local_params, const DeviceRates& rates);

PassTime engine_layer_time(const ModelConfig& model, const ParallelLayout& layout,
                           const DeviceRates& rates, bool moe_layer);
PassTime engine_output_layer_time(const ModelConfig& model, const ParallelLayout& layout,
                                  const DeviceRates& rates);
PassTime engine_embedding_time(const ModelConfig& model, const ParallelLayout& layout,
                               const DeviceRates& rates);
double engine_optimizer_step_time_s(double local_params, const DeviceRates& rates);

}  // namespace sextant::sim
