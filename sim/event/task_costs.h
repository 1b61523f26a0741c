// Durations of a Plan's tasks from the cost model the analytical engine uses
// (one cost model, two engines): layer_time for the blocks, layer_comm for
// TP/CP/EP collectives, pipeline_p2p_time_s for sends, data_parallel_comm for
// each gradient bucket, the analytical optimizer step, and the activation
// memory model for what each task allocates or frees.
//
// How the analytical model's per-layer numbers map onto tasks:
//  - attention block = PassTime::attention_*; MLP block = the rest;
//  - selective recomputation runs the attention core again inside the
//    attention backward (Korthikanti et al. 2022, Sec. 5), so it lengthens
//    that task; full recomputation has tasks of its own;
//  - a block's TP collectives are half of the layer's (one per block); with
//    --tp-comm-overlap, (tp−1)/tp of them overlap the block and 1/tp is the
//    tail the block cannot hide (Wang et al. 2023, the analytical model's
//    max(c/tp, c − GEMMs) when the GEMMs hide the rest);
//  - the dispatch and the combine all-to-all are half of the layer's EP time each;
//  - each stage's compute at its own clock (a power cap: stage_rates.h), its
//    communication at the links' rates;
//  - under ZeRO-3 a bucket is an FSDP unit: its gather and reduce-scatter are
//    fsdp_unit_comm's (sim/comm/fsdp_comm.h), as in the analytical model.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/compute/stage_rates.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/plan.h"

namespace sextant::sim {

/// The link a communication task uses on its rank; tasks on one link share it.
enum class LinkKind : std::uint8_t { kNone, kNvlink, kNetwork };

struct TaskCost {
  double duration_s = 0;  // alone on an idle GPU
  LinkKind link = LinkKind::kNone;
  /// Added to the stage's activation memory when the task ends (< 0: freed).
  double activation_bytes = 0;
};

/// One cost per task of `plan` (built for `layout`), each stage's compute and
/// optimizer step at its own `rates` (stage_rates.h), communication at the
/// profile's link rates. The optimizer step is the analytical model's: the
/// stage holding most weights per GPU (largest_stage_params_per_gpu).
std::vector<TaskCost> task_costs(const Plan& plan, const ModelConfig& model,
                                 const ClusterConfig& cluster, const CostProfile& profile,
                                 const ParallelLayout& layout, const StageRates& rates);

}  // namespace sextant::sim
