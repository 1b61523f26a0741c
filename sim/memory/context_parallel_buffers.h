// The buffers of the engine's context-parallel attention core, reserved once
// and shared by every layer (BufferReserver::shared): one pass's, so a stage
// holds them once whatever its layers and micro-batches in flight. With E =
// mbs·S·kv_width (S the whole sequence, kv_width = kv_heads·head_dim of this
// tensor-parallel rank) and c = S/(2·cp):
// - all-gather (engine/transformer/context_parallel_attention_core.h): the
//   rank-major gathered [K | V] 2E bf16, K and V in sequence order 2E bf16,
//   the local chunks' dK and dV (chunk 0 sees up to S/2 keys, chunk 1 up to
//   S: 3E bf16), the rank-major fp32 gradients 2E fp32: 22·E bytes;
// - ring (as /work/wt/briefs/ring_shared.md describes it; the engine's
//   own reserve() holds less, context_parallel_core_parts): two [K | V] receive buffers
//   (2 · 2·mbs·2c·kv_width bf16), the fp32 out accumulator (mbs·2c,
//   heads·head_dim), a bf16 partial out and its fp32 LSE (c rows), the fp32 dQ
//   (mbs·2c rows), two travelling fp32 dK/dV accumulators (2 · 2·mbs·2c·kv_width),
//   bf16 partial dK/dV (2c key rows) and dQ (c rows) scratch;
// - both: flash attention's backward workspace for the largest call, c
//   queries against up to S (all-gather) or 2c (ring) keys, batch 1
//   (kernels/flash_attention.h, flash_attention_backward_workspace_bytes):
//   the fp32 dQ accumulator and delta rows, and, for GQA at head_dim 64, K, V,
//   dK and dV expanded to every query head (bf16: room the generic kernel's
//   expansion needs on devices other than compute capability 9.0, reserved on
//   every device). The one-GPU core's workspace is not counted
//   (the memory model has none); this one is counted whole.
// Megatron-Core's cores (Transformer Engine) hold comparable transient
// buffers (context_parallel.py: p2p_comm_buffers, out_per_step, dkv buffers);
// they are costed as the engine's.
#pragma once

#include "sim/core/cost_profile.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// The cp core's buffers on one GPU by the engine's category: its K/V,
/// gradient and accumulator buffers (activations) and flash attention's
/// backward workspace (other); zeros when cp = 1.
struct ContextParallelCoreBytes {
  double buffers = 0;
  double workspace = 0;
  double total() const { return buffers + workspace; }
};
/// `software`: the ring's buffers as our engine reserves them (one fp32 buffer
/// for the out accumulator and dQ) or as above (Megatron-Core, Transformer Engine).
ContextParallelCoreBytes context_parallel_core_parts(const ModelConfig& model, const ParallelLayout& layout,
                                                     Software software = Software::kMegatronPublished);

/// Bytes of the cp core's buffers on one GPU (both parts); 0 when cp = 1.
double context_parallel_core_bytes(const ModelConfig& model, const ParallelLayout& layout);

}  // namespace sextant::sim
