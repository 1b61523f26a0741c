#include "sim/comm/context_ring_overlap.h"

#include <algorithm>

namespace sextant::sim {

namespace {

bool stepwise(const PassTime& t) { return t.ring_forward.step_s > 0 || t.ring_forward.first_step_s > 0; }

// What of `exchange_s` the step of `compute_s` beside it does not hide.
double excess(double exchange_s, double compute_s) { return std::max(0.0, exchange_s - compute_s); }

}  // namespace

ContextRingTimes context_ring_exposed(const PassTime& t, const LayerComm& c, int cp) {
  ContextRingTimes out;
  if (cp <= 1) return out;
  if (!c.cp_overlaps_core) return {c.cp_forward_s, c.cp_backward_s};
  if (!stepwise(t)) {
    const double core_f = t.attention_core_run_forward_s;
    return {excess(c.cp_forward_s, core_f), excess(c.cp_backward_s, 2.0 * core_f)};
  }
  const double kv = c.cp_kv_exchange_s, grad = c.cp_gradient_exchange_s;
  const RingSteps& f = t.ring_forward;
  const RingSteps& b = t.ring_backward;
  const double middle = cp - 2.0;  // steps 1..cp−2
  out.forward_s = excess(kv, f.first_step_s) + middle * excess(kv, f.step_s);
  out.backward_s = excess(kv, b.first_step_s) + middle * excess(kv + grad, b.step_s) +
                   excess(grad, b.step_s) + grad;
  return out;
}

ContextRingTimes context_ring_task(const PassTime& t, const LayerComm& c, int cp) {
  if (cp <= 1 || !c.cp_overlaps_core || !stepwise(t)) return {c.cp_forward_s, c.cp_backward_s};
  const ContextRingTimes exposed = context_ring_exposed(t, c, cp);
  return {t.ring_forward.total_s(cp) + exposed.forward_s, t.ring_backward.total_s(cp) + exposed.backward_s};
}

}  // namespace sextant::sim
