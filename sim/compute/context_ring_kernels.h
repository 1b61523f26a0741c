// The engine's ring attention core (cp_comm_type=p2p) as it runs on one rank
// (engine/transformer/context_parallel_ring_attention_core.h; Liu et al. 2023,
// ring attention, with Megatron-Core's causal load balancing: rank r holds
// chunks r and 2cp−1−r of c = seq/(2·cp) tokens, engine/model/context_parallel_chunks.h).
// Per sequence of the micro-batch, the flash attention calls of a step
// (each has c query rows):
//   step 0 (its own keys):  q0 x k0 causal (c²/2 pairs), q1 x [k0 k1]
//                           bottom-right causal (c·2c − c²/2 = 1.5·c² pairs);
//   a source s < r:         q0 x k_s0 and q1 x k_s0, non-causal (c² pairs each);
//   a source s > r:         q1 x [k_s0 k_s1], non-causal (2·c² pairs).
// Every step computes 2·c² pairs on every rank; at every step 1..cp−1 some
// rank runs the two-call kind and some the one-call kind (ranks r >= i and
// r < i at step i), so a later step costs the slower of the two.
// Each call is costed by attention_call_times (the square causal table at
// equal pairs). Besides the calls, memory-bound passes (bytes read and
// written at the HBM rate, untabled_memory_kernel_s):
//   forward, per call: merge_attention_partial (kernels/attention_merge.h)
//     reads the bf16 partial out (2 B per element) and its fp32 LSE, and
//     reads and writes the fp32 out and LSE accumulators (the first
//     contribution of a chunk only writes them); after the last step one
//     store_bf16_rows (kernels/fp32_rows.h) of the whole out: read 4, write 2 B;
//   backward, per call: accumulate_bf16_rows of the partial dQ (c rows) into
//     the fp32 dQ (read 2 + read 4 + write 4 B per element; the first of a
//     chunk overwrites: 2 + 4) and of the partial dK, dV (the call's key rows)
//     into the travelling fp32 accumulator (10 B per element, counted as +=
//     also where a step-0 call overwrites); after the last step dQ, dK, dV
//     rounded to bf16 (store_bf16_rows: 6 B per element).
#pragma once

#include "sim/compute/device_rates.h"

namespace sextant::sim {

/// One pass's core in steps: step 0, each later step (the slowest rank's),
/// and the work after the last step; the pass is first + (cp − 1)·step + finish.
struct RingSteps {
  double first_step_s = 0;
  double step_s = 0;
  double finish_s = 0;
  double total_s(double cp) const { return first_step_s + (cp - 1) * step_s + finish_s; }
};
struct RingAttentionTimes {
  RingSteps forward, backward;
};

/// The ring core of `batch` sequences of `seq` tokens (the whole sequence),
/// `heads` query and `kv_heads` key/value heads of `head_dim` (as flash
/// attention runs them), over `cp` >= 2 ranks.
RingAttentionTimes ring_attention_times(double batch, double heads, double kv_heads, double seq,
                                        double head_dim, double cp, const DeviceRates& rates);

}  // namespace sextant::sim
