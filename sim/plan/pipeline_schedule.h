// The order in which one pipeline stage runs the forward and backward passes of
// its micro-batches: the program of one rank, before it is expanded into tasks.
//
// Four schedules, each as its reference implementation orders the passes:
//  - GPipe (Huang et al. 2019): every forward, then every backward.
//  - 1F1B (Narayanan et al. 2021, Sec. 2.2.1; Megatron-Core
//    forward_backward_pipelining_without_interleaving): stage s runs
//    min(p−s−1, m) warm-up forwards, then alternates one forward and one
//    backward, then drains the remaining backwards.
//  - Interleaved 1F1B (Narayanan et al. 2021, Sec. 2.2.2; Megatron-Core
//    forward_backward_pipelining_with_interleaving): v model chunks per stage;
//    micro-batches go round in groups of p, chunk by chunk; stage s runs
//    2(p−s−1) + (v−1)p warm-up chunk-forwards (all of them when m = p).
//  - ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 3.1, and
//    their DeepSpeed schedule ZeroBubbleH1Pipeline with exact semantics):
//    backward split into B (input gradient) and W (weight gradient); stage s
//    runs p−s−1 warm-up forwards, then s rounds of F,B with W deferred, then
//    F,B,W rounds, then B,W, then the deferred W's. The first stage runs whole
//    backwards. Peak in-flight micro-batches: p on every stage.
#pragma once

#include <string_view>
#include <vector>

#include "sim/core/parallel_layout.h"

namespace sextant::sim {

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved, kZeroBubbleH1 };
std::string_view to_string(PipelineSchedule value);

/// The schedule a layout asks for (layout.schedule).
PipelineSchedule pipeline_schedule_of(const ParallelLayout& layout);

enum class PassKind : unsigned char {
  kForward,
  kBackward,        // input and weight gradients together
  kBackwardInput,   // zero-bubble B
  kBackwardWeight,  // zero-bubble W
};

/// One pass of one model chunk over one micro-batch.
struct PipelineOp {
  PassKind kind;
  int chunk;
  int microbatch;
  friend bool operator==(const PipelineOp&, const PipelineOp&) = default;
};

/// The ops stage `stage` of `pp` runs, in order, for `microbatches`
/// micro-batches and `vpp` chunks per stage (vpp > 1 only for kInterleaved,
/// which also needs microbatches to be a multiple of pp: Megatron's rule).
/// Throws std::invalid_argument on a shape the schedule does not support.
/// `extra_warmup` chunk-forwards are added to the interleaved warm-up:
/// Megatron-Core adds one under --overlap-moe-expert-parallel-comm
/// (schedules.py), so that a combined forward-backward step's backward does
/// not wait on the stage downstream finishing the forward paired with it.
std::vector<PipelineOp> stage_program(PipelineSchedule schedule, int pp, int vpp,
                                      int microbatches, int stage, int extra_warmup = 0);

}  // namespace sextant::sim
