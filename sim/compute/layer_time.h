// Compute time of one transformer layer, and of the output layer, for one
// micro-batch on one GPU: the GEMMs by shape, the attention core, and the
// memory-bound element-wise kernels by bytes moved — as the kernel list of the
// profile's software (layer_kernels.h) runs them. The embedding's forward also
// carries the fit's per-micro-batch overhead, the optimizer step the per-step
// ones, so both engines (analytic and event) see them.
#pragma once

#include "sim/compute/context_ring_kernels.h"
#include "sim/compute/device_rates.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct PassTime {
  double forward_s = 0;
  double backward_s = 0;
  /// Parts of forward_s, kept for recomputation and communication overlap.
  double attention_core_forward_s = 0;  // what selective recomputation runs again
  /// The core's forward as it runs: its own task under context parallelism and
  /// what the ring's exchanges hide behind (attention_core_forward_s is the
  /// same for Megatron, 0 for the engine, which recomputes nothing of it).
  double attention_core_run_forward_s = 0;
  /// The engine's ring core (cp_comm_type=p2p) step by step, what each step's
  /// exchanges overlap (sim/comm/context_ring_overlap.h); zero where the core
  /// hides its ring as a whole (Megatron's cost).
  RingSteps ring_forward, ring_backward;
  double gemm_forward_s = 0;            // tensor-parallel GEMMs (hide TP comm)
  double gemm_backward_s = 0;
  /// Parts of backward_s: the ring-attention core (what CP ring steps hide behind)
  /// and the GEMMs producing weight gradients (a zero-bubble schedule's W pass;
  /// the rest of backward_s is its B pass; Qi et al. 2023, Sec. 2).
  double attention_core_backward_s = 0;
  double weight_gradient_s = 0;
  /// The attention block's share (norm, QKV, core, projection, dropout-add) of
  /// forward_s, backward_s and weight_gradient_s; the MLP block (and, in FP8,
  /// its input casts) is the rest. The event simulator runs the blocks as two
  /// tasks; forward_s and backward_s are summed as before, not from the parts.
  double attention_forward_s = 0;
  double attention_backward_s = 0;
  double attention_weight_gradient_s = 0;
  /// Part of forward_s a MoE layer's shared expert takes (what
  /// --moe-shared-expert-overlap runs beside the token dispatch and combine).
  double shared_expert_forward_s = 0;
  /// Part of forward_s that full recomputation does not run again (the
  /// engine's fc2 forward, whose output the next layer stored); 0 for Megatron.
  double full_recompute_skipped_s = 0;
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

/// Gradient norm, clipping and Adam over the `local_params` this GPU updates,
/// with the step's fixed host and launch work.
double optimizer_step_time_s(double local_params, const DeviceRates& rates);

}  // namespace sextant::sim
