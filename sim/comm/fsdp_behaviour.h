// How each ZeRO-3 / FSDP implementation runs its collectives: what one FSDP
// unit (a transformer layer, the embedding, the output layer) gathers and
// reduces, how far gathers run ahead of compute, and how many reductions may
// be in flight. Both engines take these numbers from here: the analytical
// model's closed form (sim/analytic/fsdp_exposure.h) and the Plan's
// dependencies (sim/plan/plan_builder.cc).
//
// All three gather the unit's bf16 weights before its forward and again before
// its backward (parameters are resharded after the forward), and reduce-scatter
// the unit's gradients after its backward on every micro-batch (none keeps
// unsharded gradients across micro-batches):
//  - megatron-fsdp: Megatron-Core's custom FSDP, data_parallel_sharding_strategy
//    optim_grads_params (megatron/core/distributed/fsdp/src/megatron_fsdp/
//    megatron_fsdp.py: grad_reduce_every_bprop for optim_grads_params;
//    suggested_communication_unit_size = max(1e9, 2 · unit), all-gather
//    prefetch of half of it, i.e. at least 5e8 parameters beyond the unit in
//    hand, and a reduce-scatter queue of at least 1e9 parameters,
//    param_and_grad_buffer.py AllGatherPipeline / GradReducePipeline). One
//    coalesced collective per unit; gradients reduced in fp32 under bf16
//    (grad_reduce_in_fp32, as Megatron's --bf16 sets it).
//  - fsdp2: PyTorch fully_shard (torch/distributed/fsdp/_fully_shard/
//    _fsdp_param_group.py): implicit forward prefetch of one unit (the next
//    all-gather waits for the current one's copy-out, wait_for_unshard), explicit
//    backward prefetch of one unit (_backward_prefetch), and the compute stream
//    waits for the previous unit's reduce-scatter before issuing the next
//    (post_backward), so one reduction in flight. One foreach all-gather per
//    unit; reduce dtype fp32 (torchtitan's MixedPrecisionPolicy default).
//  - deepspeed-zero3: DeepSpeed's stage 3 as of 2021 (v0.3-0.5): each
//    submodule's parameters fetched when the submodule runs, and the fetch is
//    synchronous (DeepSpeed PR #1188, June 2021: "the async version is not async
//    at all, because each all_gather calls torch.cuda.synchronize()"), so no
//    gather overlaps compute; one gather per parameter-holding submodule (QKV,
//    attention projection, FC1, FC2 and two norms in a Megatron-DeepSpeed layer);
//    gradients reduced in the training dtype with overlap_comm on a side stream
//    (default for stage 3), one bucket in flight.
#pragma once

#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct FsdpBehaviour {
  /// Units whose all-gathers may run ahead of the unit being computed; 0: each
  /// gather starts when compute reaches its unit and compute waits for it.
  int prefetch_units = 1;
  /// Reduce-scatters in flight before compute waits for the oldest.
  int reduce_queue_units = 1;
  /// Collectives one unit's gather takes (its bytes split evenly among them).
  int gathers_per_unit = 1;
  /// Bytes per parameter of the gradient reduce-scatter.
  double gradient_bytes_per_param = 4;
};

/// `unit_params`: parameters of one transformer layer on one GPU (what the
/// size-based prefetch and queue limits count).
FsdpBehaviour fsdp_behaviour(FsdpImplementation implementation, double unit_params,
                             Precision precision);

}  // namespace sextant::sim
