// Memory per GPU: model states, activations and the rank's runtime memory
// (CUDA context, NCCL: runtime_memory.h), for the pipeline stage that needs most.
//
// `software` picks whose activations are counted: Megatron's (Korthikanti et
// al. 2022, activation_memory.h) by default, or, for our engine
// (Software::kSextantEngine), the engine's arena block by block
// (engine_arena.h: bf16 logits, one pass's shared buffers, its workspaces),
// for dense models; MoE models keep Korthikanti's count under both.
#pragma once

#include "sim/core/cost_profile.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/pipeline_split.h"
#include "sim/memory/parameter_count.h"
#include "sim/memory/runtime_memory.h"

#include <vector>

namespace sextant::sim {

struct MemoryBreakdown {
  double parameters = 0;        // bf16 weights
  double gradients = 0;         // fp32 main gradients
  double optimizer_states = 0;  // fp32 master weights, Adam m and v
  double activations = 0;
  double other = 0;             // transient buffers: gathered parameters (ZeRO-3), the cp core's
                                // (context_parallel_buffers.h)
  RuntimeMemory runtime;        // beyond the tensors: CUDA context, NCCL (runtime_memory.h)
  /// The tensors alone: what the engine's arena holds.
  double tensors() const { return parameters + gradients + optimizer_states + activations + other; }
  double total() const { return tensors() + runtime.total(); }
};

/// Model-state bytes per parameter under Megatron's mixed precision with Adam:
/// 2 (bf16 weight) + 4 (fp32 gradient) + 12 (fp32 master, m, v) = 18, and the
/// ZeRO stages (Rajbhandari et al. 2020, Sec. 5, with Megatron's fp32
/// gradients): stage 1 (Megatron's distributed optimizer) shards the 12
/// optimizer bytes over the data-parallel group, stage 2 the gradients too,
/// stage 3 the weights too.
struct StateBytesPerParam {
  double parameters, gradients, optimizer_states;
};
StateBytesPerParam state_bytes_per_param(int zero_stage, double shards,
                                         double gradient_bytes = 4);

/// The breakdown of pipeline stage `stage`.
MemoryBreakdown stage_memory(const ModelConfig& model, const ParallelLayout& layout, int stage,
                             Software software = Software::kMegatronPublished);
MemoryBreakdown stage_memory(const ModelConfig& model, const ParallelLayout& layout,
                             const PipelineSplit& split, int stage,
                             Software software = Software::kMegatronPublished);

/// What pipeline stage `stage` holds whatever the ZeRO stage: its weights per
/// GPU, its activations and its runtime memory (none reads zero, fsdp or the
/// data-parallel overlaps, so the search computes them once for layouts
/// differing only there).
struct StageHoldings {
  StageParams params;
  double activation_bytes = 0;
  int num_layers = 0;
  RuntimeMemory runtime;
  double cp_core_bytes = 0;  // the cp attention core's shared buffers (context_parallel_buffers.h)
  double workspace_bytes = 0;  // the engine's workspaces, tokens and losses (engine_arena.h; 0 for Megatron)
};
StageHoldings stage_holdings(const ModelConfig& model, const ParallelLayout& layout,
                             const PipelineSplit& split, int stage,
                             Software software = Software::kMegatronPublished);
/// The breakdown of a stage holding `holdings` under `layout`'s ZeRO stage.
MemoryBreakdown stage_memory(const ParallelLayout& layout, const StageHoldings& holdings);

/// The breakdown of the stage that needs most memory. Stages holding the same
/// layers differ only in micro-batches in flight, which never grow with the
/// stage index, and in runtime memory (pipeline peers, the embedding group), so
/// a stage the one before it covers (StageLayers::covers) with no more runtime
/// memory is skipped.
MemoryBreakdown peak_memory_per_gpu(const ModelConfig& model, const ParallelLayout& layout,
                                    Software software = Software::kMegatronPublished);
MemoryBreakdown peak_memory_per_gpu(const ModelConfig& model, const ParallelLayout& layout,
                                    const PipelineSplit& split,
                                    Software software = Software::kMegatronPublished);
/// The holdings of the stages peak_memory_per_gpu evaluates, and the peak over them.
std::vector<StageHoldings> peak_stage_holdings(const ModelConfig& model, const ParallelLayout& layout,
                                               const PipelineSplit& split,
                                               Software software = Software::kMegatronPublished);
MemoryBreakdown peak_memory_per_gpu(const ParallelLayout& layout, const std::vector<StageHoldings>& stages);

}  // namespace sextant::sim
