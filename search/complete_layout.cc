#include "search/complete_layout.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "sim/analytic/analytic_model.h"
#include "sim/core/layout_check.h"

namespace sextant::search {

using namespace sim;

namespace {

template <typename T>
std::vector<T> given_or(const std::optional<T>& given, std::vector<T> options) {
  if (given) return {*given};
  return options;
}

std::vector<int> powers_of_two_dividing(long n, long limit) {
  std::vector<int> out;
  for (long v = 1; v <= limit; v *= 2) {
    if (n % v == 0) out.push_back(static_cast<int>(v));
  }
  return out;
}

std::vector<int> divisors(long n, long limit) {
  std::vector<int> out;
  for (long v = 1; v <= std::min(n, limit); ++v) {
    if (n % v == 0) out.push_back(static_cast<int>(v));
  }
  return out;
}

bool better(const SimulationResult& a, const SimulationResult& b) {
  if (a.step_time_s != b.step_time_s) return a.step_time_s < b.step_time_s;
  return a.memory.total() < b.memory.total();
}

}  // namespace

Completion complete_layout(const ModelConfig& m, const ClusterConfig& cluster,
                           const CostProfile& profile, long gpus, const PartialLayout& p,
                           const CompletionOptions& options) {
  Completion out;
  const double memory_limit =
      (1.0 - options.memory_headroom) * static_cast<double>(cluster.gpu.memory_bytes);
  std::optional<ParallelLayout> first_invalid;
  std::optional<SimulationResult> smallest_unfit;

  const long heads_groups = std::gcd(m.num_attention_heads, m.num_query_groups);
  const std::vector<int> tps = given_or(p.tp, powers_of_two_dividing(heads_groups, std::min(gpus, 64L)));
  const std::vector<int> cps = given_or(p.cp, powers_of_two_dividing(m.seq_length / 2, 16));
  const int experts = m.moe ? m.moe->num_experts : 1;
  const std::vector<int> eps = given_or(p.ep, divisors(experts, experts));
  const std::vector<Recompute> recomputes = given_or(
      p.recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull});

  for (int tp : tps) {
    for (int cp : cps) {
      if (gpus % (static_cast<long>(tp) * cp) != 0) continue;
      const long rest = gpus / (static_cast<long>(tp) * cp);
      for (int pp : given_or(p.pp, divisors(m.num_layers, rest))) {
        if (rest % pp != 0 && !p.dp) continue;
        const int dp = p.dp ? *p.dp : static_cast<int>(rest / pp);
        const int gbs = p.gbs.value_or(0);
        const std::vector<int> vpps =
            p.vpp ? std::vector<int>{*p.vpp}
                  : (pp > 1 ? divisors(m.num_layers / pp, m.num_layers / pp) : std::vector<int>{1});
        const long per_replica = dp > 0 && gbs % dp == 0 ? gbs / dp : 0;
        const std::vector<int> mbss = given_or(p.mbs, divisors(per_replica, 16));
        const std::vector<int> etps = given_or(p.etp, tp > 1 ? std::vector<int>{1, tp}
                                                             : std::vector<int>{1});
        // ZeRO-2/3 need pp = 1 (layout_check); try them only there.
        const std::vector<int> zeros =
            given_or(p.zero, pp == 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 1});
        const std::vector<bool> sps = given_or(p.sp, tp > 1 ? std::vector<bool>{true, false}
                                                            : std::vector<bool>{false});
        for (int vpp : vpps)
          for (int mbs : mbss.empty() ? std::vector<int>{p.mbs.value_or(1)} : mbss)
            for (int ep : m.moe ? eps : std::vector<int>{p.ep.value_or(1)})
              for (int etp : m.moe ? etps : std::vector<int>{p.etp.value_or(1)})
                for (bool sp : sps)
                  for (Recompute recompute : recomputes)
                    for (int zero : zeros) {
                      ParallelLayout l;
                      l.tp = tp; l.cp = cp; l.pp = pp; l.dp = dp; l.vpp = vpp;
                      l.ep = ep; l.etp = etp; l.mbs = mbs; l.gbs = gbs; l.sp = sp;
                      l.recompute = recompute; l.zero = zero;
                      l.schedule = p.schedule.value_or(vpp > 1 ? Schedule::kInterleaved
                                                               : Schedule::kOneFOneB);
                      l.precision = p.precision.value_or(Precision::kBf16);
                      l.attention = p.attention.value_or(AttentionKernel::kFlash);
                      l.overlap_grad_reduce = p.overlap_grad_reduce.value_or(true);
                      l.overlap_param_gather = p.overlap_param_gather.value_or(zero >= 1);
                      l.tp_comm_overlap = p.tp_comm_overlap.value_or(false);
                      ++out.evaluated;
                      if (!is_valid_layout(m, cluster, gpus, l)) {
                        if (!first_invalid) first_invalid = l;
                        continue;
                      }
                      ++out.valid;
                      SimulationResult r = simulate_analytic(m, cluster, profile, l);
                      if (options.require_memory_fit && r.memory.total() > memory_limit) {
                        if (!smallest_unfit || r.memory.total() < smallest_unfit->memory.total())
                          smallest_unfit = r;
                        continue;
                      }
                      ++out.fitting;
                      if (!out.best || better(r, *out.best)) out.best = r;
                    }
      }
    }
  }
  if (!out.best) {
    if (smallest_unfit) {
      const auto gib = [](double bytes) {
        char text[32];
        std::snprintf(text, sizeof text, "%.1f", bytes / (1024.0 * 1024 * 1024));
        return std::string(text);
      };
      out.reasons.push_back(
          {"--layout", 0, 0, "",
           "no completion fits in memory: the smallest, " + smallest_unfit->layout.to_spec() +
               ", needs " + gib(smallest_unfit->memory.total()) + " GiB per GPU; " +
               gib(memory_limit) + " GiB available after the " +
               std::to_string(static_cast<int>(options.memory_headroom * 100)) + "% headroom"});
    } else {
      // Explain with the first candidate tried or, when the given knobs left no
      // candidate at all (tp·cp not dividing the GPUs, say), with the given
      // knobs and 1 for the rest.
      ParallelLayout example = first_invalid.value_or(ParallelLayout{});
      if (!first_invalid) {
        example.tp = p.tp.value_or(1);
        example.cp = p.cp.value_or(1);
        example.pp = p.pp.value_or(1);
        example.dp = p.dp.value_or(static_cast<int>(
            std::max(1L, gpus / (static_cast<long>(example.tp) * example.cp * example.pp))));
        example.mbs = p.mbs.value_or(1);
        example.gbs = p.gbs.value_or(example.mbs * example.dp);
      }
      out.reasons = check_layout(m, cluster, gpus, example);
      if (out.reasons.empty()) {
        out.reasons.push_back({"--layout", 0, 0, "", "no valid completion of this layout exists"});
      }
    }
  }
  return out;
}

}  // namespace sextant::search
