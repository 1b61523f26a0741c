#include "sim/memory/memory_model.h"

#include "sim/memory/activation_memory.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {

StateBytesPerParam state_bytes_per_param(int zero_stage, double shards) {
  constexpr double kWeight = 2, kGradient = 4, kOptimizer = 12;
  return {zero_stage >= 3 ? kWeight / shards : kWeight,
          zero_stage >= 2 ? kGradient / shards : kGradient,
          zero_stage >= 1 ? kOptimizer / shards : kOptimizer};
}

MemoryBreakdown stage_memory(const ModelConfig& m, const ParallelLayout& l, int stage) {
  const StageParams params = stage_params_per_gpu(m, l, stage);
  // Dense weights are sharded over data-parallel and context-parallel ranks
  // (Megatron's dp-cp group), expert weights over expert-data-parallel ranks.
  const StateBytesPerParam dense = state_bytes_per_param(l.zero, static_cast<double>(l.dp) * l.cp);
  const StateBytesPerParam expert = state_bytes_per_param(l.zero, l.expert_dp());
  MemoryBreakdown out;
  out.parameters = params.dense * dense.parameters + params.expert * expert.parameters;
  out.gradients = params.dense * dense.gradients + params.expert * expert.gradients;
  out.optimizer_states =
      params.dense * dense.optimizer_states + params.expert * expert.optimizer_states;
  out.activations = stage_activation_bytes(m, l, stage);
  if (l.zero >= 3) {
    // ZeRO-3 gathers each layer's bf16 weights before use and prefetches the
    // next: two layers' full (unsharded over dp) weights.
    const int layers = m.num_layers / l.pp;
    out.other = 2.0 * 2.0 * params.total() / layers;
  }
  return out;
}

MemoryBreakdown peak_memory_per_gpu(const ModelConfig& m, const ParallelLayout& l) {
  const MemoryBreakdown first = stage_memory(m, l, 0);
  if (l.pp == 1) return first;
  const MemoryBreakdown last = stage_memory(m, l, l.pp - 1);
  return last.total() > first.total() ? last : first;
}

}  // namespace sextant::sim
