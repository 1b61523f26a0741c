// The two terms Megatron's kernel list is written in: one linear layer's three
// GEMMs, and one memory-bound element-wise kernel, each added to a PassTime.
// Shared by the dense layer (megatron_layer_kernels.cc), multi-head latent
// attention (mla_kernels.cc) and the routed experts (expert_kernels.cc).
#pragma once

#include "sim/compute/device_rates.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_time.h"

namespace sextant::sim {

/// Forward, input-gradient and fp32-accumulating weight-gradient GEMMs of a
/// linear layer over `tokens` rows, in_width → out_width, `batch` of them in one launch.
void add_linear(PassTime& t, double tokens, double out_width, double in_width, double batch,
                const DeviceRates& rates);

/// Adds a linear layer's three GEMM times already computed (forward; input and
/// weight gradients to the backward).
void add_linear_times(PassTime& t, const LinearTimes& g);

/// An element-wise kernel moving `forward_bytes` at the achieved HBM rate in
/// `forward_kernels` launches; its backward reads the saved input and the
/// incoming gradient and writes the input gradient, about twice the traffic.
void add_elementwise(PassTime& t, double forward_bytes, int forward_kernels,
                     const DeviceRates& rates);

}  // namespace sextant::sim
