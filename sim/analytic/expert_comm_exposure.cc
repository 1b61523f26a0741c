#include "sim/analytic/expert_comm_exposure.h"

#include <algorithm>
#include <cstdlib>

namespace sextant::sim {

namespace {

// Stage s's chunk of the k-th forward (or backward) chunk-pass in the
// interleaved order (pipeline_schedule.cc, interleaved_op).
int chunk_of(long k, bool forward, int pp, int vpp) {
  const int chunk = static_cast<int>(k % (static_cast<long>(pp) * vpp) / pp);
  return forward ? chunk : vpp - 1 - chunk;
}

// Unpaired layer passes over all layer passes (2·m·L) of one stage.
double stage_unpaired(const ParallelLayout& l, const PipelineSplit& split, int stage) {
  const int p = l.pp, v = l.vpp;
  const long m = l.num_microbatches();
  const long total = m * v;
  const long warmup = m == p ? total
                             : std::min<long>(2L * (p - stage - 1) + (v - 1L) * p + 1, total);
  const auto layers = [&](int chunk) { return split.chunk(stage, chunk).num_layers; };
  long stage_layers = 0;
  for (int c = 0; c < v; ++c) stage_layers += layers(c);
  if (stage_layers == 0) return 0.0;
  double alone = 0;
  // Warm-up forwards and cool-down backwards have no partner.
  for (long k = 0; k < warmup; ++k) alone += layers(chunk_of(k, true, p, v));
  for (long k = total - warmup; k < total; ++k) alone += layers(chunk_of(k, false, p, v));
  // Steady state: forward k + warmup beside backward k; the chunks repeat every p·v.
  const long steps = total - warmup, period = static_cast<long>(p) * v;
  for (long r = 0; r < std::min(period, steps); ++r) {
    const long count = steps / period + (r < steps % period ? 1 : 0);
    alone += count * std::abs(layers(chunk_of(r + warmup, true, p, v)) -
                              layers(chunk_of(r, false, p, v)));
  }
  return alone / (2.0 * static_cast<double>(m) * static_cast<double>(stage_layers));
}

}  // namespace

double unpaired_pass_fraction(const ParallelLayout& l, const PipelineSplit& split) {
  if (!l.moe_a2a_overlap) return 1.0;
  const double m = static_cast<double>(l.num_microbatches());
  if (m <= 0) return 1.0;
  if (l.pp == 1 || l.schedule != Schedule::kInterleaved) return 1.0 / m;  // first F, last B
  if (split.even()) {
    // Stage s runs 2(p−s−1) + (v−1)p warm-up chunk-forwards, and one more under
    // this overlap (all of them when m = p), and as many cool-down
    // chunk-backwards. The step's critical path crosses every stage, so the
    // stages' mean counts: (p−1) + (v−1)p + 1.
    const double total = m * l.vpp;
    const double warmup = l.num_microbatches() == l.pp
                              ? total
                              : std::min((l.pp - 1.0) + (l.vpp - 1.0) * l.pp + 1.0, total);
    return warmup / total;
  }
  double sum = 0;
  for (int s = 0; s < l.pp; ++s) sum += stage_unpaired(l, split, s);
  return sum / l.pp;
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
