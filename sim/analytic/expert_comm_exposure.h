// How much of a MoE layer's expert-parallel all-to-all the step waits for, per
// micro-batch, under the overlaps Megatron-Core offers (both off by default):
//  - none: dispatch and combine sit between the router and the experts, and
//    between the experts and the residual add, forward and backward: all of it;
//  - --moe-shared-expert-overlap (moe_shared_expert_overlap): the shared
//    expert's forward runs on its own stream beside the dispatch (half of it)
//    and the combine (the other half); the backward is unchanged;
//  - --overlap-moe-expert-parallel-comm (moe_a2a_overlap; Megatron-Core's
//    combined 1F1B, pipeline_parallel/combined_1f1b.py): a forward and a
//    backward of different micro-batches run together layer by layer, each
//    all-to-all beside a block of the other pass (plan_builder.cc, combined()):
//      backward dispatch  beside forward attention
//      forward dispatch   beside backward MLP
//      backward combine   beside forward MLP
//      forward combine    beside backward attention
//    and shows only where it outlasts that block. Passes with no partner (the
//    first forward and last backward with pp = 1; the warm-up forwards and
//    cool-down backwards of the interleaved schedule) wait for all of theirs.
// The event simulator plays the same task graph (its a2a tasks on their own
// stream); tests/sim/invariants checks that both agree.
#pragma once

#include "sim/comm/parallel_comm.h"
#include "sim/compute/layer_time.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/pipeline_split.h"

namespace sextant::sim {

/// Fraction of the layer passes (forward and backward) that run without a
/// partner in the combined step, the mean over stages: 1/m with pp = 1;
/// warm-up/(m·v) in the interleaved schedule (sim/plan/pipeline_schedule.cc);
/// 1 when moe_a2a_overlap is off. With chunks of unequal layer counts a
/// combined step pairs n_F forward with n_B backward layers and |n_F − n_B|
/// run alone (plan_builder.cc, combined()); those count as unpaired too.
double unpaired_pass_fraction(const ParallelLayout& layout, const PipelineSplit& split);

/// Exposed expert all-to-all of one MoE layer for one micro-batch (forward and
/// backward; full recomputation's repeat of the forward included).
/// `recompute_s` is what the backward runs again before its own work.
double exposed_expert_comm_s(const PassTime& compute, const LayerComm& comm,
                             const ParallelLayout& layout, double recompute_s,
                             double unpaired_fraction);

}  // namespace sextant::sim
