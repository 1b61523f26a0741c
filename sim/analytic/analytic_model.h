// The analytical model: a closed-form step time, memory and MFU for one layout.
//
// step = m · t_stage + bubble + exposed p2p + exposed data-parallel sync + optimizer,
// where t_stage is the slowest pipeline stage's forward + backward (+ recompute)
// time for one micro-batch including its exposed TP/CP/EP communication, and the
// bubble is (Σ stages − slowest)/v, which is (p−1)/v·t for equal stages
// (Narayanan et al. 2021, Sec. 2.2, bubble fraction (p−1)/(v·m)). Exposed p2p:
// every send under 1F1B/GPipe, the 2(p·v − 1) boundary crossings of the fill
// and drain (plus any steady-state excess) under interleaving. Exposed DP
// sync: Megatron's bucketed reductions and gathers, or under ZeRO-3 the
// per-unit FSDP pipeline of sim/analytic/fsdp_exposure.h.
// Each stage's compute at the rates it runs at under the run's conditions
// (sim/compute/stage_rates.h: launch mode, power cap).
// Fast enough for the search: no allocation, a few hundred floating-point
// operations (twice, with an allocation, under a power cap).
#pragma once

#include <memory>

#include "sim/core/pipeline_split.h"

#include "sim/analytic/simulation_result.h"
#include "sim/compute/stage_rates.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// `layout` must be valid (check_layout) for `model` on layout.total_gpus() GPUs.
SimulationResult simulate_analytic(const ModelConfig& model, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& layout);

/// The same, with the memory breakdown (peak_memory_per_gpu) already computed:
/// the search prunes by memory first and does not compute it twice.
SimulationResult simulate_analytic(const ModelConfig& model, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& layout,
                                   const MemoryBreakdown& memory);

/// The same, with the pipeline split (pipeline_split) already computed too.
SimulationResult simulate_analytic(const ModelConfig& model, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& layout,
                                   const MemoryBreakdown& memory, const PipelineSplit& split);

/// Under given run conditions rather than the profile's own (run_conditions):
/// the event engine's burst-clock play, `run --compare`'s timed tasks.
SimulationResult simulate_analytic(const ModelConfig& model, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& layout,
                                   const RunConditions& conditions);
SimulationResult simulate_analytic(const ModelConfig& model, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& layout,
                                   const MemoryBreakdown& memory, const PipelineSplit& split,
                                   const RunConditions& conditions);

/// A bound the search prunes with: the step time of `layout` without its
/// data-parallel sync and optimizer step (compute, exposed TP/CP/EP and
/// pipeline sends, bubble), at most simulate_analytic(...).step_time_s, bit
/// for bit, of every layout that differs from `layout` only in zero, fsdp,
/// overlap_grad_reduce and overlap_param_gather (none of which this part
/// reads). 0 under a power cap, whose clocks depend on the whole step.
double step_time_lower_bound_s(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostProfile& profile, const ParallelLayout& layout,
                               const PipelineSplit& split);

/// Whether `a` and `b` differ only in zero, fsdp, overlap_grad_reduce,
/// overlap_param_gather and, when `recompute_too`, recompute: the knobs the
/// per-layer costs (layer_time, layer_comm, embedding and output layer) do
/// not read; without recompute, the knobs step_time_lower_bound_s does not read.
bool same_but_data_parallel_sync(const ParallelLayout& a, const ParallelLayout& b, bool recompute_too);

/// step_time_lower_bound_s for a run of layouts, the per-layer costs computed
/// once for layouts that are same_but_data_parallel_sync(..., true): the
/// search's bound, three recompute choices for one costing. Not thread-safe:
/// one per worker.
class StepBoundCache {
 public:
  StepBoundCache();
  ~StepBoundCache();
  double lower_bound_s(const ModelConfig& model, const ClusterConfig& cluster, const CostProfile& profile,
                       const ParallelLayout& layout, const PipelineSplit& split);

 private:
  struct Costs;
  std::unique_ptr<Costs> costs_;
};

}  // namespace sextant::sim
