#include "search/candidate_space.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "search/split_options.h"
#include "sim/core/pipeline_split.h"

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

// 1F1B where the software runs it, else its first schedule of one model chunk
// per stage (GPipe, say).
Schedule one_model_chunk_schedule(const FrameworkSupport& s) {
  if (s.runs(Schedule::kOneFOneB)) return Schedule::kOneFOneB;
  for (Schedule schedule : s.schedules)
    if (schedule != Schedule::kInterleaved) return schedule;
  return Schedule::kOneFOneB;
}

std::vector<int> divisors(long n, long limit) {
  std::vector<int> out;
  for (long v = 1; v <= std::min(n, limit); ++v) {
    if (n % v == 0) out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

std::vector<GridPoint> grid_points(const ModelConfig& m, const ClusterConfig& cluster, long gpus,
                                   const PartialLayout& p, const SearchConstraints& c) {
  long tp_limit = std::min(gpus, 64L);
  if (c.max_tp) tp_limit = std::min<long>(tp_limit, *c.max_tp);
  if (c.tp_within_node) tp_limit = std::min<long>(tp_limit, cluster.gpus_per_node);
  const long heads_and_groups = std::gcd(m.num_attention_heads, m.num_query_groups);
  long layout_stages = 0;  // an explicit pp_layout's virtual stages: pp must divide them
  if (p.pp_layout) {
    std::vector<std::string> stages;
    std::string error;
    expand_pp_layout(*p.pp_layout, stages, error);
    layout_stages = static_cast<long>(stages.size());
  }
  std::vector<GridPoint> out;
  for (int tp : given_or(p.tp, powers_of_two_dividing(heads_and_groups, tp_limit))) {
    for (int cp : given_or(p.cp, c.supports.context_parallel ? powers_of_two_dividing(m.seq_length / 2, 16)
                                                              : std::vector<int>{1})) {
      const long tp_cp = static_cast<long>(tp) * cp;
      if (gpus % tp_cp != 0) continue;
      // Any pp up to the layer count: pipeline_split.h splits unevenly where
      // the layers do not divide.
      for (int pp : given_or(p.pp, divisors(gpus / tp_cp, std::min<long>(gpus / tp_cp, m.num_layers)))) {
        if ((gpus / tp_cp) % pp != 0) continue;
        if (layout_stages > 0 && !p.pp && layout_stages % pp != 0) continue;
        const int dp = static_cast<int>(gpus / tp_cp / pp);
        if (p.dp && *p.dp != dp) continue;
        out.push_back({tp, cp, pp, dp});
      }
    }
  }
  return out;
}

void for_each_layout_at(const ModelConfig& m, const PartialLayout& p, const GridPoint& g,
                        const SearchConstraints& c, const std::function<void(const ParallelLayout&)>& visit) {
  const int gbs = p.gbs.value_or(0);
  const sim::FrameworkSupport& s = c.supports;
  std::vector<int> vpp_choices =
      g.pp > 1 && s.runs(Schedule::kInterleaved) ? vpp_options(m.num_layers, g.pp) : std::vector<int>{1};
  if (p.pp_layout) {
    // An explicit layout fixes pp·vpp: its number of virtual stages.
    std::vector<std::string> stages;
    std::string error;
    expand_pp_layout(*p.pp_layout, stages, error);
    const int count = static_cast<int>(stages.size());
    vpp_choices = {count % g.pp == 0 ? std::max(1, count / g.pp) : 1};
  }
  const std::vector<int> vpps = given_or(p.vpp, vpp_choices);
  const long per_replica = gbs % g.dp == 0 ? gbs / g.dp : 0;
  const std::vector<int> mbss = given_or(p.mbs, divisors(per_replica, 16));
  const int experts = m.moe ? m.moe->num_experts : 1;
  const bool experts_split = m.moe && s.expert_parallel;
  const std::vector<int> eps = given_or(p.ep, experts_split ? divisors(experts, experts) : std::vector<int>{1});
  const std::vector<int> etps =
      given_or(p.etp, experts_split && g.tp > 1 ? std::vector<int>{1, g.tp} : std::vector<int>{1});
  const std::vector<bool> sps =
      given_or(p.sp, g.tp > 1 && s.sequence_parallel ? std::vector<bool>{true, false} : std::vector<bool>{false});
  const std::vector<Recompute> recomputes = given_or(
      p.recompute, c.allow_selective_recompute
                       ? std::vector<Recompute>{Recompute::kNone, Recompute::kSelective,
                                                Recompute::kFull}
                       : std::vector<Recompute>{Recompute::kNone, Recompute::kFull});
  // ZeRO-2/3 need pp = 1 (layout_check): try them only there.
  // ZeRO-3 always overlaps its gathers and reduce-scatters (parse_layout
  // refuses turning that off with zero=3): not offered where an overlap is off.
  const bool overlaps_off = p.overlap_grad_reduce == false || p.overlap_param_gather == false ||
                            !s.overlap_grad_reduce || !s.overlap_param_gather;
  std::vector<int> zeros =
      given_or(p.zero, p.fsdp ? std::vector<int>{3}  // naming the FSDP implementation means zero=3
                       : g.pp > 1 ? std::vector<int>{0, 1}
                       : overlaps_off ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1, 2, 3});
  // Only the stages the software runs at this pipeline size.
  std::erase_if(zeros, [&](int zero) { return zero > s.max_zero(g.pp); });
  // bf16 (and fp8 when asked for) where the software runs them, else its first precision.
  std::vector<Precision> precisions =
      c.allow_fp8 ? std::vector<Precision>{Precision::kBf16, Precision::kFp8} : std::vector<Precision>{Precision::kBf16};
  std::erase_if(precisions, [&](Precision q) { return !s.runs(q); });
  if (precisions.empty() && !s.precisions.empty()) precisions = {s.precisions.front()};
  if (p.precision) precisions = {*p.precision};
  // Megatron-FSDP unless named, or the software's first implementation.
  const FsdpImplementation fsdp = p.fsdp.value_or(
      s.runs(FsdpImplementation::kMegatronFsdp) || s.fsdp.empty() ? FsdpImplementation::kMegatronFsdp : s.fsdp.front());
  const std::vector<bool> both{true, false};
  const bool data_parallel = static_cast<long>(g.dp) * g.cp > 1 || m.moe;
  const std::vector<bool> no{false};
  // Overlap flags only where they change something: TP communication (tp > 1
  // with sp), a data-parallel group to sync. ZeRO-3 always overlaps both (it
  // prefetches the next layer's weights and reduce-scatters during the
  // backward), so its layouts say so, as the model computes them.
  const std::vector<bool> tp_overlaps_with_sp = given_or(p.tp_comm_overlap, g.tp > 1 && s.tp_comm_overlap ? both : no);
  const std::vector<bool>& grad_both = s.overlap_grad_reduce ? both : no;
  const std::vector<bool>& gather_both = s.overlap_param_gather ? both : no;
  const std::vector<bool> tp_overlaps_without_sp = given_or(p.tp_comm_overlap, no);
  std::vector<bool> grad_overlaps[4], gather_overlaps[4];  // by ZeRO stage
  for (int zero = 0; zero <= 3; ++zero) {
    grad_overlaps[zero] = given_or(p.overlap_grad_reduce, !data_parallel ? no
                                                          : zero == 3    ? std::vector<bool>{true}
                                                                         : grad_both);
    gather_overlaps[zero] = given_or(p.overlap_param_gather, !data_parallel ? no
                                                             : zero == 3    ? std::vector<bool>{true}
                                                             : zero >= 1    ? gather_both
                                                                            : no);
  }

  ParallelLayout l;  // one layout, reused: its pp_layout keeps its buffer
  l.tp = g.tp;
  l.cp = g.cp;
  l.pp = g.pp;
  l.dp = g.dp;
  l.gbs = gbs;
  l.attention = p.attention.value_or(s.flash_attention ? AttentionKernel::kFlash : AttentionKernel::kUnfused);
  // Off unless asked for, as in Megatron-Core.
  l.moe_a2a_overlap = p.moe_a2a_overlap.value_or(false);
  l.moe_shared_expert_overlap = p.moe_shared_expert_overlap.value_or(false);
  l.fsdp = fsdp;
  // Megatron-Core's default unless asked for (the engine runs all_gather).
  l.cp_comm_type = p.cp_comm_type.value_or(CpCommType::kP2p);
  l.grad_reduce_in_fp32 = p.grad_reduce_in_fp32.value_or(true);
  for (int vpp : vpps) {
    // The user's split, or the default for this (pp, vpp); the search tries
    // the other splits on its best layouts (layout_search.cc).
    const SplitKnobs split = p.split_given()              ? given_split(p)
                             : s.uneven_pipeline_split ? default_split(m, g.pp, vpp)
                                                       : SplitKnobs{};
    l.vpp = vpp;
    split.apply_to(l);
    // With one model chunk per stage, 1F1B holds fewer micro-batches than GPipe
    // and is never slower; GPipe is tried only when asked for.
    const std::vector<Schedule> schedules = given_or(
        p.schedule, vpp > 1 ? std::vector<Schedule>{Schedule::kInterleaved}
                            : std::vector<Schedule>{one_model_chunk_schedule(s)});
    // The data-parallel sync's knobs (zero and its two overlaps) vary
    // innermost, recompute just outside them: the search bounds the step of
    // such a run once and costs the layers once for the recompute choices
    // (sim/analytic/analytic_model.h, StepBoundCache).
    for (Schedule schedule : schedules)
      for (int mbs : mbss)
        for (int ep : eps)
          for (int etp : etps)
            for (bool sp : sps)
              for (Precision precision : precisions)
                for (bool tp_overlap : sp ? tp_overlaps_with_sp : tp_overlaps_without_sp)
                  for (Recompute recompute : recomputes)
                    for (int zero : zeros)
                      for (bool grad_overlap : grad_overlaps[zero])
                        for (bool gather_overlap : gather_overlaps[zero]) {
                          l.schedule = schedule;
                          l.mbs = mbs;
                          l.ep = ep;
                          l.etp = etp;
                          l.sp = sp;
                          l.recompute = recompute;
                          l.precision = precision;
                          l.tp_comm_overlap = tp_overlap;
                          l.zero = zero;
                          l.overlap_grad_reduce = grad_overlap;
                          l.overlap_param_gather = gather_overlap;
                          visit(l);
                        }
  }
}

}  // namespace sextant::search
