// How much of context parallelism's communication the attention core hides,
// per layer and micro-batch: one home for both engines (the analytic model
// adds the exposed time; the event simulator's plan runs the ring task beside
// the core task, plan_builder.cc, so its duration is the ring's span).
//
// - The engine's ring (PassTime::ring_forward/ring_backward set,
//   sim/compute/context_ring_kernels.h), step by step: at step i the exchange
//   of the next [K | V] runs beside step i's core, and the core waits for it
//   before step i+1 (double buffering, engine/transformer/
//   context_parallel_ring_attention_core.h). Forward: an exchange beside
//   steps 0..cp−2. Backward: beside step 0 the [K | V] exchange, beside steps
//   1..cp−2 the [K | V] exchange and the previous step's dK/dV hop (one after
//   the other on the cp stream), beside step cp−1 step cp−2's hop, and after
//   the last step one more hop (home) that nothing hides. Exposed: the sum of
//   each step's excess over its compute.
// - Megatron-Core's ring (Transformer Engine), as costed so far: the cp−1
//   exchanges hide behind the whole core, forward, and twice the core's
//   forward, backward.
// - The all-gather variant (LayerComm::cp_overlaps_core false): nothing hides.
#pragma once

#include "sim/comm/parallel_comm.h"
#include "sim/compute/layer_time.h"

namespace sextant::sim {

struct ContextRingTimes {
  double forward_s = 0;
  double backward_s = 0;
};

/// The context-parallel communication the core does not hide.
ContextRingTimes context_ring_exposed(const PassTime& compute, const LayerComm& comm, int cp);

/// The duration of the plan's ring task beside the core task: the exposed
/// time plus the core's for the engine's ring (the core and its exchanges end
/// together then: max(core, ring) = core + exposed), the exchanges' total otherwise.
ContextRingTimes context_ring_task(const PassTime& compute, const LayerComm& comm, int cp);

}  // namespace sextant::sim
