#include "sim/compute/context_ring_kernels.h"

#include <algorithm>

#include "sim/compute/kernel_costs.h"

namespace sextant::sim {

RingAttentionTimes ring_attention_times(double batch, double heads, double kv_heads, double seq,
                                        double head_dim, double cp, const DeviceRates& r) {
  const double c = seq / (2 * cp);
  const double q_width = heads * head_dim, kv_width = kv_heads * head_dim;
  // Bytes of one merge of c query rows into the accumulators (attention_merge.h):
  // partial out bf16 and LSE read; out fp32 and LSE read and written (first: written).
  const double merge_first = c * (2 * q_width + 4 * heads + 4 * q_width + 4 * heads);
  const double merge = c * (2 * q_width + 4 * heads + 8 * q_width + 8 * heads);
  // Backward accumulations (fp32_rows.h): dQ of c rows; dK and dV of `keys` rows.
  const double dq_first = c * q_width * (2 + 4), dq = c * q_width * (2 + 8);
  auto dkv = [&](double keys) { return 2 * keys * kv_width * (2 + 8); };
  auto pass = [&](double bytes) { return untabled_memory_kernel_s(bytes, r); };
  auto call = [&](double pairs) { return attention_call_times(pairs, heads, kv_heads, head_dim, r); };

  const AttentionTimes causal_square = call(c * c / 2), causal_wide = call(1.5 * c * c);
  const AttentionTimes square = call(c * c), wide = call(2 * c * c);
  RingAttentionTimes t;
  // Step 0: q0 x k0 (c keys) and q1 x [k0 k1] (2c keys), each chunk's first contribution.
  t.forward.first_step_s =
      batch * (causal_square.forward_s + causal_wide.forward_s + 2 * pass(merge_first));
  t.backward.first_step_s = batch * (causal_square.backward_s + causal_wide.backward_s +
                                     2 * pass(dq_first) + pass(dkv(c)) + pass(dkv(2 * c)));
  // Later steps: two c x c calls (s < r) or one c x 2c call (s > r), the slower.
  t.forward.step_s = batch * std::max(2 * (square.forward_s + pass(merge)), wide.forward_s + pass(merge));
  t.backward.step_s = batch * std::max(2 * (square.backward_s + pass(dq) + pass(dkv(c))),
                                       wide.backward_s + pass(dq) + pass(dkv(2 * c)));
  // The fp32 out (batch·2c rows) rounded to bf16; dQ, dK and dV likewise.
  const double rows = batch * 2 * c;
  t.forward.finish_s = pass(6 * rows * q_width);
  t.backward.finish_s = pass(6 * rows * q_width) + 2 * pass(6 * rows * kv_width);
  return t;
}

}  // namespace sextant::sim
