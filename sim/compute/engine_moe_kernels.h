// Our engine's MoE block (engine/transformer/moe_layer.cc; tp = 1, each expert whole on its ep rank),
// which takes the place of the dense MLP block in an MoE layer of
// engine_layer_kernels.cc: the router, the routing map, the permutation, the
// experts' grouped GEMMs and the un-permutation (kernels/moe_*.h), costed kernel
// by kernel. The kernel list is written in engine_moe_kernels.cc.
//
// Two things set this block apart from the dense one:
//  - the experts' products run on one of two backends chosen by the mean rows
//    per expert (engine_expert_gemm_backend), each with its own cost;
//  - the router copies the experts' row counts to the host and waits for them
//    (cuBLAS needs the sizes to launch), so every MoE layer's forward restarts
//    the host's race with the GPU (host_issued_launches.h).
#pragma once

#include <string>
#include <vector>

#include "sim/compute/device_rates.h"
#include "sim/compute/host_issued_launches.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_time.h"
#include "sim/core/transformer_shape.h"

namespace sextant::sim {

/// The two backends of the engine's expert products (kernels/moe_grouped_gemm.h).
enum class ExpertGemmBackend { kCublasGrouped, kCublasLtLoop };
/// The engine's choice for `shape` (TransformerShape::expert_gemms_in_loop).
ExpertGemmBackend engine_expert_gemm_backend(const TransformerShape& shape);

/// One expert linear layer (in_width -> out_width) over all `experts`, each
/// with `rows_per_expert` rows, on `backend`: each
/// product's GPU time (all experts together; the grouped backend's fp32 weight
/// gradient with its staging add), and the host's time to issue it.
struct ExpertLinearTimes {
  ExpertGemmBackend backend = ExpertGemmBackend::kCublasGrouped;
  LinearTimes gpu;
  LinearTimes host;
  /// The part of gpu.weight_gradient_s that is the grouped backend's fp32 staging add.
  double staging_add_s = 0;
  /// Host time a product spends in the library beyond its launches (`host`
  /// counts those): cuBLAS's grouped call builds its per-group arguments; 0 for the loop.
  double library_host_s = 0;
};
ExpertLinearTimes engine_expert_linear_times(ExpertGemmBackend backend, double rows_per_expert, double in_width,
                                             double out_width, double experts,
                                             const DeviceRates& rates);

/// The rest of the layer, around which the MoE block's host race runs: the
/// attention block and norm2 (engine_layer_kernels.cc), each pass's GPU time and launches.
struct DenseLaunches {
  double forward_gpu_s = 0;
  double backward_gpu_s = 0;
  int forward_launches = 0;
  int backward_launches = 0;
};

/// One launch of the MoE block: the engine's kernel (its name as Nsight Compute
/// shows it, or what the host calls: "router GEMM", "expert GEMMs (grouped)"), its
/// GPU time and the host's time to issue it.
struct MoeKernelLaunch {
  std::string kernel;
  KernelLaunch launch;
};

/// The MoE block of one layer for one micro-batch on one rank, norm2 excluded,
/// as the host issues it: the forward up to the router's host sync, the forward
/// after it, and the backward; with the block's GEMM totals (PassTime's fields).
struct EngineMoeKernels {
  std::vector<MoeKernelLaunch> before_sync, after_sync, backward;
  double gemm_forward_s = 0;
  double gemm_backward_s = 0;
  double weight_gradient_s = 0;
  double full_recompute_skipped_s = 0;
};
/// `capacity_factor` > 0: the experts keep at most that many times their even
/// share of the pairs, the largest router weights first (the engine's and
/// Megatron's `probs` drop policy), which sorts all pairs before the sync.
EngineMoeKernels engine_moe_block_kernels(const TransformerShape& shape, double expert_load_factor,
                                          const DeviceRates& rates, double capacity_factor = 0.0);

/// The MoE block of one layer for one micro-batch on one rank, norm2 excluded
/// (engine_layer_kernels.cc costs it with the dense block's), the router's host
/// sync included: forward_s and backward_s carry the block's kernels and the
/// time the host's launches leave the GPU idle over the whole layer (`rest`).
/// The busiest rank's rows are routed_pairs() x expert_load_factor (as
/// megatron_layer_kernels.cc takes them).
PassTime engine_moe_block_time(const TransformerShape& shape, double expert_load_factor,
                               const DenseLaunches& rest, const DeviceRates& rates, double capacity_factor = 0.0);

}  // namespace sextant::sim
