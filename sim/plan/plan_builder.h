// Builds the Plan of one training iteration for a layout: each pipeline
// stage's schedule (pipeline_schedule.h) expanded into per-layer tasks and
// their communication, with the dependencies that order them.
//
// What each stage's representative rank runs, per layer and micro-batch:
//  - the attention and MLP blocks' forward, backward (or, zero-bubble, the
//    input-gradient and weight-gradient halves), and under full recomputation
//    the forward again before the backward;
//  - after each block, its tensor-parallel collectives (Shoeybi et al. 2019:
//    an all-reduce per block and pass; under SP an all-gather before and a
//    reduce-scatter after, one task here). They sit on the compute chain;
//    with --tp-comm-overlap they run beside the block's GEMMs and only the
//    last of tp chunks follows it (Wang et al. 2023);
//  - under context parallelism the attention core is its own task, with the
//    cp−1 ring steps beside it on the CP stream (Liu et al. 2023);
//  - in MoE layers with ep > 1, the dispatch all-to-all before the MLP block
//    and the combine after it (Lepikhin et al. 2020); nothing hides them;
//  - pipeline sends of activations and gradients between adjacent virtual
//    stages. Under GPipe and 1F1B they are Megatron's blocking batched
//    send/recv: the transfer starts when the receiver has finished its
//    previous compute (it posts the receive then) and the sender's next
//    compute waits for it. The interleaved schedule overlaps them
//    (--overlap-p2p-communication), and so does ZB-H1: a send starts when its
//    data is ready and only the receiver waits. DeepSpeed's PipelineEngine
//    (sequential exchange) receives with a blocking call of its own: a receive
//    task on the receiving stage's chain, starting with the matching send
//    (when both stages have posted theirs) and lasting as long, so a stage's
//    receive and its own send never overlap;
//  - data-parallel gradient buckets (gradient_buckets.h), each reduced as soon
//    as the last micro-batch's gradients in it are ready (--overlap-grad-reduce;
//    without it, after the whole backward); with ZeRO-2 after every
//    micro-batch; with ZeRO-3 every layer is its own FSDP unit, its weights
//    gathered before each micro-batch's forward and backward, the gathers
//    running ahead of compute by the implementation's prefetch depth and
//    compute waiting when more reductions are in flight than it queues
//    (sim/comm/fsdp_behaviour.h);
//  - the weights' all-gather of the distributed optimizer: with
//    --overlap-param-gather at the start of the iteration, each bucket before
//    its first forward (the steady state of Megatron gathering during the next
//    iteration's forward); otherwise after the optimizer step;
//  - with tied embeddings and pp > 1, on the first and last stage the
//    all-reduce of the embedding's gradient between its two copies, after
//    the data-parallel reduction (each end's task runs on its own clock; the
//    two are not made to start together);
//  - the optimizer step after the stage's last reduction.
// Tasks on one stage's compute chain (compute, TP, CP, EP, blocking sends)
// depend on the one before; the data-parallel stream runs beside it.
#pragma once

#include <optional>

#include "sim/core/framework_behaviour.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/gradient_buckets.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

struct PlanOptions {
  /// The pipeline schedule; default: the layout's (pipeline_schedule_of).
  std::optional<PipelineSchedule> schedule;
  /// Parameters per data-parallel gradient bucket (--ddp-bucket-size);
  /// default: Megatron's (default_bucket_params).
  std::optional<double> bucket_params;
  /// How stages exchange activations (the framework's behaviour); sequential
  /// exchange adds a blocking receive task on the receiving stage under
  /// GPipe and 1F1B.
  PipelineExchange pipeline_exchange = PipelineExchange::kBatched;
};

/// `layout` must be valid for `model` (check_layout). Throws
/// std::invalid_argument when the schedule cannot run the layout (ZB-H1 with
/// vpp > 1, interleaving with a micro-batch count not a multiple of pp).
Plan build_plan(const ModelConfig& model, const ParallelLayout& layout,
                const PlanOptions& options = {});

}  // namespace sextant::sim
