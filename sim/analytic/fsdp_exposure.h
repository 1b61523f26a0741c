// Exposed ZeRO-3 / FSDP communication of one training step, in closed form:
// the analytical model's counterpart of the Plan's per-unit gathers and
// reduce-scatters (sim/plan/plan_builder.cc), with the same units, collective
// times (sim/comm/fsdp_comm.h) and prefetch behaviour (fsdp_behaviour.h).
//
// Every micro-batch runs the units forward (embedding, layers, output layer)
// and backward (output layer, layers in reverse, embedding), each use of a unit
// preceded by the gather of its weights, and each backward followed by the
// reduce-scatter of its gradients. With a prefetch depth of at least one, the
// link and the compute stream form a two-stage pipeline, so a unit's use costs
// max(compute, link time) and exposes the excess: forward max(0, g − f) and
// backward, where gather and reduce-scatter share the link, max(0, g + r − b).
// The units that are not layers borrow link time the layers leave free, as far
// as the implementation lets them: the output layer's gathers run ahead behind
// the last `prefetch_units` layers' forward, its reduce-scatter and the
// embedding's queue behind the next `reduce_queue_units` layers. What nothing
// can hide, once per step: the first gather and the last reduce-scatters (the
// first layer's and the embedding's, after the last compute). Without
// prefetching (DeepSpeed stage 3 of 2021) every gather is on the critical path,
// and in the backward it shares the link with the previous unit's
// reduce-scatter (g + min(g, r)); only the rest of the reductions overlaps compute.
//
// Compared with the event engine on the single-stage layouts ZeRO-3 allows
// (tests/sim/invariants/engines_agree_test.cc): the steady state is the same;
// the closed form ignores how far a deep prefetch (Megatron-FSDP) borrows link
// time across the forward/backward boundary and between micro-batches
// (llama3-70b tp=8 dp=8: step 91.07 s analytic, 90.68 s event), and FSDP2's
// copy-out of each gathered unit on the compute stream is modelled by neither.
#pragma once

#include "sim/comm/collective_cost.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// Critical-path time of one use of a unit (compute plus its exposed TP/CP/EP).
struct UnitCompute {
  double forward_s = 0;
  double backward_s = 0;  // recomputation included
};

struct FsdpStepCompute {
  UnitCompute dense_layer, moe_layer, embedding, output;
};

/// Exposed data-parallel time of one step of a ZeRO-3 layout (layout.zero >= 3).
double fsdp_exposed_s(const ModelConfig& model, const ParallelLayout& layout,
                      const ClusterConfig& cluster, const LinkRates& rates,
                      const FsdpStepCompute& compute);

}  // namespace sextant::sim
