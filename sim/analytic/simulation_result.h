// What a simulation of one layout reports (the JSON of DESIGN.md, "simulate --format json").
#pragma once

#include <string>

#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/memory/memory_model.h"

namespace sextant::sim {

struct TimeBreakdown {
  double compute_s = 0;                // the slowest stage's compute, all micro-batches
  double exposed_communication_s = 0;  // communication nothing hides
  double pipeline_bubble_s = 0;        // pipeline fill and drain
  double optimizer_s = 0;              // the optimizer step
};

/// The part of the step that limits a layout most, in words for users.
enum class Limiter { kCompute, kTensorParallelComm, kContextParallelComm, kExpertParallelComm,
                     kPipelineComm, kDataParallelComm, kPipelineBubble, kOptimizer };
std::string_view to_string(Limiter value);

struct SimulationResult {
  ParallelLayout layout;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_step = 0;
  double hardware_flops_per_step = 0;
  double mfu = 0;  // model FLOPs / (step time · GPUs · dense bf16 peak)
  double hfu = 0;  // hardware FLOPs likewise
  MemoryBreakdown memory;
  bool fits_memory = false;
  TimeBreakdown time;
  /// Exposed communication by dimension (sums to time.exposed_communication_s).
  double exposed_tp_s = 0, exposed_cp_s = 0, exposed_ep_s = 0, exposed_pp_s = 0,
         exposed_dp_s = 0;
  /// The largest cost beyond pure compute (limiter_of).
  Limiter limiter = Limiter::kCompute;
};

/// The rule both engines name a layout's limiter by: the largest of the exposed
/// communication of each dimension, the bubble and the optimizer step, if it is
/// more than 5 % of the step; otherwise compute.
Limiter limiter_of(const SimulationResult& result);

/// What follows from result.step_time_s, result.layout and result.memory, by
/// one rule for both engines: tokens per second (and per GPU), the step's
/// model and hardware FLOPs (step_flops, closed forms), MFU and HFU against
/// the GPUs' dense bf16 peak, whether the memory fits, and the limiter.
void complete_from_step_time(SimulationResult& result, const ModelConfig& model, const ClusterConfig& cluster);

}  // namespace sextant::sim
