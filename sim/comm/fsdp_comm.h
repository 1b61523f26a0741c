// ZeRO-3 / FSDP communication of one unit: the all-gather of its bf16 weights
// and the reduce-scatter of its gradients over the data-parallel group, as the
// layout's implementation issues them (fsdp_behaviour.h).
//
// Dense weights are sharded over the dp·cp ranks (stride tp), expert weights
// over the expert-data-parallel ranks (stride etp·ep), each a ring at the
// bandwidth of the slowest link the group spans (collective_cost.h: the
// network once the group leaves a node), with one launch cost per collective.
#pragma once

#include "sim/comm/collective_cost.h"
#include "sim/comm/fsdp_behaviour.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// One transformer layer's parameters on one GPU (before ZeRO sharding):
/// attention and dense MLP split by tp, norms and router replicated, experts
/// split by ep·etp.
struct UnitParams {
  double dense = 0, expert = 0;
  double total() const { return dense + expert; }
};
UnitParams layer_params_per_gpu(const ModelConfig& model, const ParallelLayout& layout,
                                bool moe_layer);

/// The layout's implementation, its size limits counted in its largest layer.
FsdpBehaviour fsdp_behaviour_of(const ModelConfig& model, const ParallelLayout& layout);

struct FsdpUnitComm {
  double gather_s = 0;  // all-gather of the unit's weights (one use: forward or backward)
  double reduce_s = 0;  // reduce-scatter of its gradients (one micro-batch)
};
FsdpUnitComm fsdp_unit_comm(const UnitParams& unit, const FsdpBehaviour& behaviour,
                            const ParallelLayout& layout, const ClusterConfig& cluster,
                            const LinkRates& rates);

}  // namespace sextant::sim
