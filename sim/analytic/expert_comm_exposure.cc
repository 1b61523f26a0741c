#include "sim/analytic/expert_comm_exposure.h"

#include <algorithm>

namespace sextant::sim {

double unpaired_pass_fraction(const ParallelLayout& l) {
  if (!l.moe_a2a_overlap) return 1.0;
  const double m = static_cast<double>(l.num_microbatches());
  if (m <= 0) return 1.0;
  if (l.pp == 1) return 1.0 / m;  // the first forward and the last backward
  // Interleaved 1F1B: stage s runs 2(p−s−1) + (v−1)p warm-up chunk-forwards,
  // and one more under this overlap (pipeline_schedule.h; all of them when
  // m = p), and as many cool-down chunk-backwards. The step's critical path
  // crosses every stage, so the stages' mean counts: (p−1) + (v−1)p + 1.
  const double total = m * l.vpp;
  const double warmup = l.num_microbatches() == l.pp
                            ? total
                            : std::min((l.pp - 1.0) + (l.vpp - 1.0) * l.pp + 1.0, total);
  return warmup / total;
}

double exposed_expert_comm_s(const PassTime& t, const LayerComm& c, const ParallelLayout& l,
                             double recompute_s, double unpaired) {
  const bool full = l.recompute == Recompute::kFull;
  const double forward_s = c.ep_forward_s, backward_s = c.ep_backward_s;
  const double repeat_s = full ? forward_s : 0.0;  // full recomputation dispatches again
  if (l.moe_shared_expert_overlap) {
    // Each half of the forward all-to-all beside half the shared expert.
    const double forward_exposed = 2.0 * std::max(0.0, forward_s / 2 - t.shared_expert_forward_s / 2);
    return forward_exposed + backward_s + repeat_s;
  }
  const double all_s = forward_s + backward_s + repeat_s;
  if (!l.moe_a2a_overlap) return all_s;
  const double attention_f = t.attention_forward_s;
  const double mlp_f = t.forward_s - t.attention_forward_s;
  const double attention_b = t.attention_backward_s + recompute_s;
  const double mlp_b = t.backward_s - t.attention_backward_s;
  const double paired = std::max(0.0, backward_s / 2 - attention_f) +
                        std::max(0.0, forward_s / 2 - mlp_b) +
                        std::max(0.0, backward_s / 2 - mlp_f) +
                        std::max(0.0, forward_s / 2 - attention_b);
  return unpaired * all_s + (1.0 - unpaired) * paired;
}

}  // namespace sextant::sim
