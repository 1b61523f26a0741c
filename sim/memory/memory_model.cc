#include "sim/memory/memory_model.h"

#include "sim/memory/activation_memory.h"
#include "sim/memory/context_parallel_buffers.h"
#include "sim/memory/engine_arena.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {

StateBytesPerParam state_bytes_per_param(int zero_stage, double shards, double gradient_bytes) {
  constexpr double kWeight = 2, kOptimizer = 12;
  return {zero_stage >= 3 ? kWeight / shards : kWeight,
          zero_stage >= 2 ? gradient_bytes / shards : gradient_bytes,
          zero_stage >= 1 ? kOptimizer / shards : kOptimizer};
}

MemoryBreakdown stage_memory(const ModelConfig& m, const ParallelLayout& l, int stage, Software software) {
  return stage_memory(m, l, pipeline_split(m, l), stage, software);
}

MemoryBreakdown stage_memory(const ModelConfig& m, const ParallelLayout& l,
                             const PipelineSplit& split, int stage, Software software) {
  return stage_memory(l, stage_holdings(m, l, split, stage, software));
}

StageHoldings stage_holdings(const ModelConfig& m, const ParallelLayout& l, const PipelineSplit& split,
                             int stage, Software software) {
  const StageLayers& layers = split.stage(stage);
  const ModelTraffic traffic{m.tie_embeddings, m.moe.has_value()};
  StageHoldings out{stage_params_per_gpu(m, l, layers), 0.0, layers.num_layers, runtime_memory(l, stage, traffic)};
  if (software == Software::kSextantEngine && engine_arena_modelled(m)) {
    // The engine's arena as its parts reserve it; its cp core's buffers are among them.
    const EngineArenaBytes arena = engine_stage_arena_bytes(m, l, split, stage);
    out.activation_bytes = arena.activations;
    out.workspace_bytes = arena.other;
    return out;
  }
  out.activation_bytes = stage_activation_bytes(m, l, stage, layers);
  out.cp_core_bytes = layers.num_layers > 0 ? context_parallel_core_bytes(m, l) : 0.0;
  return out;
}

MemoryBreakdown stage_memory(const ParallelLayout& l, const StageHoldings& holdings) {
  const StageParams& params = holdings.params;
  // Dense weights are sharded over data-parallel and context-parallel ranks
  // (Megatron's dp-cp group), expert weights over expert-data-parallel ranks.
  const StateBytesPerParam dense = state_bytes_per_param(l.zero, static_cast<double>(l.dp) * l.cp, l.gradient_bytes_per_param());
  const StateBytesPerParam expert = state_bytes_per_param(l.zero, l.expert_dp(), l.gradient_bytes_per_param());
  MemoryBreakdown out;
  out.parameters = params.dense * dense.parameters + params.expert * expert.parameters;
  out.gradients = params.dense * dense.gradients + params.expert * expert.gradients;
  out.optimizer_states =
      params.dense * dense.optimizer_states + params.expert * expert.optimizer_states;
  out.activations = holdings.activation_bytes;
  out.runtime = holdings.runtime;
  if (l.zero >= 3 && holdings.num_layers > 0) {
    // ZeRO-3 gathers each layer's bf16 weights before use and prefetches the
    // next: two layers' full (unsharded over dp) weights.
    out.other = 2.0 * 2.0 * params.total() / holdings.num_layers;
  }
  out.other += holdings.cp_core_bytes + holdings.workspace_bytes;
  return out;
}

MemoryBreakdown peak_memory_per_gpu(const ModelConfig& m, const ParallelLayout& l, Software software) {
  return peak_memory_per_gpu(m, l, pipeline_split(m, l), software);
}

MemoryBreakdown peak_memory_per_gpu(const ModelConfig& m, const ParallelLayout& l,
                                    const PipelineSplit& split, Software software) {
  return peak_memory_per_gpu(l, peak_stage_holdings(m, l, split, software));
}

std::vector<StageHoldings> peak_stage_holdings(const ModelConfig& m, const ParallelLayout& l,
                                               const PipelineSplit& split, Software software) {
  std::vector<StageHoldings> out;
  const ModelTraffic traffic{m.tie_embeddings, m.moe.has_value()};
  double runtime_before = 0;
  for (int s = 0; s < split.pp(); ++s) {
    // The stage before holds as much and keeps as many micro-batches or more.
    const double runtime = runtime_memory(l, s, traffic).total();
    const bool covered = s > 0 && split.stage(s - 1).covers(split.stage(s)) && runtime <= runtime_before;
    runtime_before = runtime;
    if (covered) continue;
    out.push_back(stage_holdings(m, l, split, s, software));
  }
  return out;
}

MemoryBreakdown peak_memory_per_gpu(const ParallelLayout& l, const std::vector<StageHoldings>& stages) {
  MemoryBreakdown peak;
  double peak_bytes = -1;
  for (const StageHoldings& stage : stages) {
    const MemoryBreakdown here = stage_memory(l, stage);
    if (here.total() > peak_bytes) {
      peak = here;
      peak_bytes = here.total();
    }
  }
  return peak;
}

}  // namespace sextant::sim
