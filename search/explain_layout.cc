#include "search/explain_layout.h"

#include <cstdio>

#include "search/complete_layout.h"
#include "search/memory_fit.h"
#include "search/grounded_layout.h"
#include "search/mechanism_evidence.h"
#include "search/split_options.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/layout_check.h"
#include "sim/core/text_format.h"
#include "sim/memory/memory_model.h"

namespace sextant::search {

using namespace sim;

namespace {

std::string gib(double bytes) { return format_gib(bytes); }
std::string percent(double fraction) { return format_percent(fraction); }

struct Component {
  const char* name;
  double bytes;
};

// The largest part of a breakdown, named for a sentence ("activations need").
Component largest(const MemoryBreakdown& m) {
  Component parts[] = {{"parameters", m.parameters},
                       {"gradients", m.gradients},
                       {"optimizer states", m.optimizer_states},
                       {"activations", m.activations},
                       {"gathered parameters", m.other},
                       {"the CUDA context and NCCL's buffers", m.runtime.total()}};
  Component best = parts[0];
  for (const Component& c : parts) {
    if (c.bytes > best.bytes) best = c;
  }
  return best;
}

// Single-knob changes that could cut memory, in the order users reach for them.
std::vector<std::pair<std::string, ParallelLayout>> memory_remedies(const ModelConfig& m,
                                                                    const ParallelLayout& l) {
  std::vector<std::pair<std::string, ParallelLayout>> out;
  auto add = [&](std::string label, ParallelLayout changed) { out.emplace_back(label, changed); };
  if (l.recompute == Recompute::kNone) {
    ParallelLayout c = l;
    c.recompute = Recompute::kSelective;
    add("recompute=selective", c);
  }
  if (l.recompute != Recompute::kFull) {
    ParallelLayout c = l;
    c.recompute = Recompute::kFull;
    add("recompute=full", c);
  }
  if (l.tp > 1 && !l.sp) {
    ParallelLayout c = l;
    c.sp = true;
    add("sp=1", c);
  }
  if (l.zero == 0) {
    ParallelLayout c = l;
    c.zero = 1;
    add("dist_opt=1", c);
  }
  if (l.zero < 3 && l.dp > 1) {
    ParallelLayout c = l;
    c.zero = 3;
    add("zero=3", c);
  }
  if (l.mbs > 1) {
    ParallelLayout c = l;
    c.mbs = 1;
    add("mbs=1", c);
  }
  if (l.dp % 2 == 0) {
    ParallelLayout c = l;
    c.pp *= 2;
    c.dp /= 2;
    c.vpp = 1;
    c.schedule = Schedule::kOneFOneB;
    c.overlap_param_gather = c.overlap_param_gather && c.zero >= 1;
    if (c.zero >= 2) c.zero = 1;
    default_split(m, c.pp, c.vpp).apply_to(c);
    if (check_pipeline_split(m, c) == SplitProblem::kNone) add("pp=" + std::to_string(c.pp), c);
    ParallelLayout t = l;
    t.tp *= 2;
    t.dp /= 2;
    add("tp=" + std::to_string(t.tp), t);
  }
  return out;
}

// The lines that set a fitting layout resting on ungrounded mechanisms (`r`)
// beside the fastest layout whose every mechanism has evidence.
void explain_grounded_runner_up(Explanation& out, const SimulationResult& r, const ModelConfig& m,
                                const ClusterConfig& cluster, const CostProfile& profile, long gpus,
                                const PartialLayout& partial, const SearchConstraints& constraints,
                                double memory_limit_bytes) {
  out.lines.push_back("rests on mechanisms without evidence: " + join_mechanisms(out.ungrounded));
  SearchOptions options;
  options.constraints = constraints;
  const GroundedAlternative alternative = fastest_grounded_layout(m, cluster, profile, gpus, partial, options);
  if (!alternative.best) {
    out.lines.push_back(no_grounded_layout_reason(alternative));
    return;
  }
  const SimulationResult& g = *alternative.best;
  out.grounded_runner_up = g;
  out.lines.push_back("fastest layout with evidence for every mechanism: " + g.layout.to_spec());
  const PickComparison comparison = compare_with_pick(g, r);
  char line[512];
  std::snprintf(line, sizeof line, "  step time %.3f s (%s), MFU %.1f %% (Megatron convention), %s per GPU",
                g.step_time_s, comparison.how.c_str(), 100 * g.mfu, gib(g.memory.total()).c_str());
  out.lines.push_back(line);
  out.lines.push_back("  limited by " + describe_limiter(g, cluster, memory_limit_bytes));
  out.lines.push_back("  " + comparison.loses);
}

}  // namespace

std::string describe_limiter(const SimulationResult& r, const ClusterConfig& cluster,
                             double memory_limit_bytes) {
  const double headroom = 1.0 - r.memory.total() / memory_limit_bytes;
  std::string out;
  const double share_of_step = [&] {
    switch (r.limiter) {
      case Limiter::kTensorParallelComm: return r.exposed_tp_s;
      case Limiter::kContextParallelComm: return r.exposed_cp_s;
      case Limiter::kExpertParallelComm: return r.exposed_ep_s;
      case Limiter::kPipelineComm: return r.exposed_pp_s;
      case Limiter::kDataParallelComm: return r.exposed_dp_s;
      case Limiter::kPipelineBubble: return r.time.pipeline_bubble_s;
      case Limiter::kOptimizer: return r.time.optimizer_s;
      case Limiter::kCompute: return r.time.compute_s;
    }
    return 0.0;
  }() / r.step_time_s;
  if (r.limiter == Limiter::kTensorParallelComm && r.layout.tp > cluster.gpus_per_node) {
    out = "exposed TP communication across nodes";
  } else if (r.limiter == Limiter::kCompute) {
    out = "compute";
  } else {
    out = "exposed " + std::string(to_string(r.limiter));
    if (r.limiter == Limiter::kPipelineBubble) out = "pipeline bubble";
  }
  out += " (" + percent(share_of_step) + " of the step)";
  if (headroom < 0.05) out += "; memory within " + percent(headroom) + " of the limit";
  return out;
}

Explanation explain_layout(const ModelConfig& m, const ClusterConfig& cluster,
                           const CostProfile& profile, long gpus, const PartialLayout& partial,
                           const SearchConstraints& constraints) {
  Explanation out;
  const Completion any = complete_layout(m, cluster, profile, gpus, partial, constraints, false);
  if (!any.best) {
    out.reasons = any.reasons;
    for (const Diagnostic& d : any.reasons) {
      out.lines.push_back((d.key.empty() ? "" : d.key + ": ") + d.message);
    }
    return out;
  }
  out.valid = true;
  // Prefer a completion that fits, if the free knobs allow one.
  const Completion fitting = complete_layout(m, cluster, profile, gpus, partial, constraints, true);
  const SimulationResult& r = fitting.best ? *fitting.best : *any.best;
  out.layout = r.layout.to_spec();
  out.ungrounded = ungrounded_mechanisms(r.layout);
  const double capacity =
      constraints.memory_limit_bytes.value_or(static_cast<double>(cluster.gpu.memory_bytes));
  const double limit = (1.0 - constraints.memory_headroom) * capacity;
  const std::string available =
      gib(limit) + " available (" + gib(capacity) + " less " +
      std::to_string(static_cast<int>(constraints.memory_headroom * 100 + 0.5)) + " % headroom)";

  // The stage that needs most memory.
  int stage = 0;
  MemoryBreakdown worst = stage_memory(m, r.layout, 0, profile.software);
  if (r.layout.pp > 1) {
    const MemoryBreakdown last = stage_memory(m, r.layout, r.layout.pp - 1, profile.software);
    if (last.total() > worst.total()) {
      worst = last;
      stage = r.layout.pp - 1;
    }
  }
  const double needed = memory_needed_bytes(worst, profile);
  out.fits = needed <= limit;
  if (out.fits) {
    char line[256];
    std::snprintf(line, sizeof line, "fits: stage %d needs %s per GPU of %s", stage,
                  gib(needed).c_str(), available.c_str());
    out.lines.push_back(line);
    std::snprintf(line, sizeof line, "step time %.3f s, MFU %.1f %% (Megatron convention)", r.step_time_s, 100 * r.mfu);
    out.lines.push_back(line);
    out.lines.push_back("limited by " + describe_limiter(r, cluster, limit));
    if (!out.ungrounded.empty())
      explain_grounded_runner_up(out, r, m, cluster, profile, gpus, partial, constraints, limit);
    return out;
  }
  // The model state alone (weights, their gradients, the optimizer's moments)
  // may exceed the memory: then activations are not the cause and a smaller
  // micro-batch or more recomputation cannot help; only sharding the state can.
  const double state = worst.parameters + worst.gradients + worst.optimizer_states;
  const bool state_too_big = state > limit;
  if (state_too_big) {
    out.lines.push_back("parameters, gradients and optimizer states alone need " + gib(state) +
                        " on stage " + std::to_string(stage) + " (" + gib(worst.parameters) +
                        " + " + gib(worst.gradients) + " + " + gib(worst.optimizer_states) +
                        "), more than the " + available +
                        "; activations (" + gib(worst.activations) +
                        ") are not the cause, so a smaller micro-batch or recomputation cannot "
                        "make it fit");
  } else {
    const Component big = largest(worst);
    out.lines.push_back(std::string(big.name) + " need " + gib(big.bytes) + " on stage " +
                        std::to_string(stage) + " (" + gib(needed) + " in all); " +
                        available);
  }
  std::string tries;
  for (const auto& [label, changed] : memory_remedies(m, r.layout)) {
    if (!is_valid_layout(m, cluster, gpus, changed)) continue;
    if (memory_needed_bytes(peak_memory_per_gpu(m, changed, profile.software), profile) > limit) continue;
    tries += (tries.empty() ? "" : " or ") + label;
  }
  if (!tries.empty()) {
    out.lines.push_back("try " + tries);
  } else if (state_too_big) {
    out.lines.push_back("no single change of zero, pp or tp makes it fit; shard the model state "
                        "over more GPUs (more tp or pp, zero=3) or use GPUs with more memory");
  } else {
    out.lines.push_back("no single change of recompute, sp, dist_opt, mbs, pp or tp makes it fit; "
                        "use more GPUs or a smaller micro-batch");
  }
  if (!out.ungrounded.empty())
    out.lines.push_back("rests on mechanisms without evidence: " + join_mechanisms(out.ungrounded));
  return out;
}

}  // namespace sextant::search
