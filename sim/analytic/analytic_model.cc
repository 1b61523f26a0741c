#include "sim/analytic/analytic_model.h"

#include <algorithm>
#include <array>
#include <vector>

#include "sim/analytic/expert_comm_exposure.h"
#include "sim/analytic/fsdp_exposure.h"
#include "sim/comm/context_ring_overlap.h"
#include "sim/comm/parallel_comm.h"
#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {

namespace {

// One micro-batch through one stage: compute and the communication it exposes.
struct StageTime {
  double forward_s = 0, backward_s = 0;  // compute, recomputation included in backward
  double weight_gradient_s = 0;          // the part of backward_s a zero-bubble W pass runs
  double tp_s = 0, cp_s = 0, ep_s = 0;   // exposed communication
  double total() const { return forward_s + backward_s + tp_s + cp_s + ep_s; }
};

struct LayerCosts {
  PassTime compute;
  LayerComm comm;
  double unpaired = 1;  // moe_a2a_overlap: passes without a partner (expert_comm_exposure.h)
};

void add_layers(StageTime& stage, const LayerCosts& layer, int count, const ParallelLayout& l) {
  if (count <= 0) return;
  const PassTime& t = layer.compute;
  const LayerComm& c = layer.comm;
  const bool full = l.recompute == Recompute::kFull;
  double recompute_s = 0;
  if (full) recompute_s = t.forward_s - t.full_recompute_skipped_s;
  if (l.recompute == Recompute::kSelective) recompute_s = t.attention_core_forward_s;

  // Tensor parallel: exposed unless --tp-comm-overlap pipelines it with the GEMMs
  // in tp chunks, leaving one chunk and whatever the GEMMs cannot cover
  // (Wang et al. 2023, "Overlap communication with dependent computation").
  const double tp_total = c.tp_forward_s + c.tp_backward_s + (full ? c.tp_forward_s : 0.0);
  double tp_exposed = tp_total;
  if (l.tp_comm_overlap && tp_total > 0) {
    const double gemm = t.gemm_forward_s + t.gemm_backward_s + (full ? t.gemm_forward_s : 0.0);
    tp_exposed = std::max(tp_total / l.tp, tp_total - gemm);
  }
  // Context parallel: what the attention core does not hide (context_ring_overlap.h);
  // full recomputation runs the forward's exchanges again.
  const ContextRingTimes cp_left = context_ring_exposed(t, c, l.cp);
  const double cp_exposed = cp_left.forward_s * (full ? 2.0 : 1.0) + cp_left.backward_s;
  // Expert parallel all-to-all: on the critical path unless one of Megatron-Core's
  // MoE overlaps is on (expert_comm_exposure.h).
  const double ep_exposed =
      exposed_expert_comm_s(t, c, l, recompute_s, layer.unpaired);

  stage.forward_s += count * t.forward_s;
  stage.backward_s += count * (t.backward_s + recompute_s);
  stage.weight_gradient_s += count * t.weight_gradient_s;
  stage.tp_s += count * tp_exposed;
  stage.cp_s += count * cp_exposed;
  stage.ep_s += count * ep_exposed;
}

StageTime stage_time(const StageLayers& stage, const ParallelLayout& l, const LayerCosts& dense,
                     const LayerCosts& moe, const PassTime& embedding, const PassTime& output) {
  StageTime out;
  add_layers(out, dense, stage.dense_layers, l);
  add_layers(out, moe, stage.moe_layers(), l);
  if (stage.embedding) {
    out.forward_s += embedding.forward_s;
    out.backward_s += embedding.backward_s;
  }
  if (stage.loss) {
    out.forward_s += output.forward_s;
    out.backward_s += output.backward_s;
  }
  return out;
}

// Communication of `total_s`, issued in v equal parts, part j as soon as chunk
// j's compute for the last micro-batch ends. Each part overlaps with its own
// chunk's compute (compute_s / v) and, before the last part, the chunks
// finish p chunk-steps apart (gap p·compute_s/v). What is left when compute
// ends is exposed: the last part's excess, or the backlog of all parts.
double exposed_after_chunked_overlap(double total_s, double v, int pp, double compute_s) {
  const double own_chunk_s = compute_s / v;
  const double gap_s = (v > 1 ? pp : 1) * compute_s / v;
  const double last_part = total_s / v - own_chunk_s;
  const double backlog = total_s - (v - 1) * gap_s - own_chunk_s;
  return std::max({0.0, last_part, backlog});
}

// Everything of a step but the data-parallel sync and the optimizer: each
// stage's per-micro-batch time, the bubble and the exposed pipeline sends.
// Reads no ZeRO stage, FSDP implementation or data-parallel overlap.
struct PipelinePart {
  DeviceRates rates;
  LinkRates links;
  LayerCosts dense, moe;
  PassTime embedding, output;
  StageTime slowest;
  double slowest_slowdown = 1;
  double microbatches = 1, v = 1;
  double bubble_s = 0, exposed_pp_s = 0;

  double compute_s() const { return microbatches * (slowest.forward_s + slowest.backward_s); }
  double exposed_communication_s(double exposed_dp_s) const {
    return microbatches * slowest.tp_s + microbatches * slowest.cp_s + microbatches * slowest.ep_s +
           exposed_pp_s + exposed_dp_s;
  }
  /// The step with the given data-parallel sync and optimizer. Every term is
  /// non-negative and rounded addition is monotone, so step_s(0, 0) is at
  /// most step_s(dp, opt) for any dp, opt >= 0, bit for bit.
  double step_s(double exposed_dp_s, double optimizer_s) const {
    return compute_s() + exposed_communication_s(exposed_dp_s) + bubble_s + optimizer_s;
  }
};

// Each pipeline stage at its rates. One stage: its layers costed at its
// rates. Several: the layers costed once, at the burst clock, and each
// stage's compute (its layers, embedding and output layer, with their kernel
// gaps and the fit's per-micro-batch overhead) scaled by its clock_slowdown.
// `stage_compute_s`, when given, receives each stage's compute per micro-batch.
// The per-layer costs of `l` at `stage_rates` (none reads recompute, zero,
// fsdp or the data-parallel overlaps: same_but_data_parallel_sync).
PipelinePart layer_costs(const ModelConfig& m, const ClusterConfig& cluster, const CostProfile& profile,
                         const ParallelLayout& l, const PipelineSplit& split, const StageRates& stage_rates) {
  PipelinePart p;
  p.rates = l.pp == 1 ? stage_rates.stage(0) : stage_rates.burst;
  p.links = link_rates(cluster, profile);
  const double unpaired = unpaired_pass_fraction(l, split);
  p.dense = LayerCosts{layer_time(m, l, p.rates, false), layer_comm(m, l, cluster, p.links, false), unpaired};
  p.moe = m.moe ? LayerCosts{layer_time(m, l, p.rates, true), layer_comm(m, l, cluster, p.links, true), unpaired}
                : p.dense;
  p.embedding = embedding_time(m, l, p.rates);
  p.output = output_layer_time(m, l, p.rates);
  return p;
}

// `costs` (layer_costs of a layout same_but_data_parallel_sync(l, ..., true))
// completed into l's pipeline part.
PipelinePart pipeline_part(PipelinePart costs, const ParallelLayout& l, const ClusterConfig& cluster,
                           const ModelConfig& m, const CostProfile& profile, const PipelineSplit& split,
                           const StageRates& stage_rates, std::vector<double>* stage_compute_s) {
  PipelinePart p = std::move(costs);
  const LinkRates& links = p.links;
  const LayerCosts& dense = p.dense;
  const LayerCosts& moe = p.moe;
  const PassTime& embedding = p.embedding;
  const PassTime& output = p.output;

  // Stages differ by the layers the split gives them (and the embedding, the
  // output layer, a MoE model's leading dense layers); a run of stages holding
  // the same is timed once. `slowest` paces the steady state, the sum of all
  // stages the fill and drain.
  StageTime& slowest = p.slowest;
  double& slowest_slowdown = p.slowest_slowdown;
  double all_stages = 0;
  StageTime run_time;
  for (int s = 0; s < l.pp; ++s) {
    const double slowdown = l.pp == 1 ? 1.0 : stage_rates.clock_slowdown(s);
    const bool new_clock = s > 0 && slowdown != stage_rates.clock_slowdown(s - 1);
    if (s == 0 || split.stage(s) != split.stage(s - 1) || new_clock) {
      run_time = stage_time(split.stage(s), l, dense, moe, embedding, output);
      run_time.forward_s *= slowdown;
      run_time.backward_s *= slowdown;
      run_time.weight_gradient_s *= slowdown;
      if (s == 0 || run_time.total() > slowest.total()) slowest = run_time, slowest_slowdown = slowdown;
    }
    if (stage_compute_s != nullptr) stage_compute_s->push_back(run_time.forward_s + run_time.backward_s);
    all_stages += run_time.total();
  }
  p.microbatches = l.num_microbatches();
  p.v = l.schedule == Schedule::kInterleaved ? l.vpp : 1.0;
  const double microbatches = p.microbatches;
  const double v = p.v;
  double& bubble_s = p.bubble_s;
  bubble_s = (all_stages - slowest.total()) / v;
  if (l.schedule == Schedule::kZeroBubbleH1) {
    // Qi et al. 2023, Sec. 3.1: ZB-H1's bubble is (p−1)(T_F + T_B − T_W) against
    // 1F1B's (p−1)(T_F + T_B + T_W), T_B the input-gradient and T_W the
    // weight-gradient pass: scale by (t − 2·T_W)/t.
    bubble_s *= std::max(0.0, 1.0 - 2.0 * slowest.weight_gradient_s / slowest.total());
  }

  // Pipeline sends: blocking in 1F1B and GPipe, one activation forward and one
  // gradient backward per micro-batch along the critical path. ZB-H1 sends
  // without blocking (Qi et al. 2023's schedule overlaps them): only the fill
  // and the drain wait for them.
  const double p2p_s = pipeline_p2p_time_s(m, l, cluster, links);
  double& exposed_pp_s = p.exposed_pp_s;
  exposed_pp_s = 2.0 * (microbatches + l.pp - 1) * p2p_s;
  const bool blocking = l.schedule == Schedule::kOneFOneB || l.schedule == Schedule::kGpipe;
  if (blocking && profile.behaviour.pipeline_exchange == PipelineExchange::kSequential) {
    // DeepSpeed's PipelineEngine: each send and receive its own blocking call
    // (deepspeed/runtime/pipe/schedule.py TrainSchedule: SendGrad then
    // RecvActivation before a forward, RecvGrad then SendActivation before a
    // backward). In the steady state a stage's receive no longer hides beside
    // its own send: four transfers per micro-batch on its chain, not two; the
    // fill and drain still wait for p − 1 each way. (A step-by-step play of
    // TrainSchedule's rendezvous with compute F = 1, B = 3 exposes 136
    // transfers for p = 8, m = 32, and 1086 for p = 35, m = 256, against
    // 142 and 1092 here; Megatron's batched exchange, 78 and 580.)
    exposed_pp_s = (4.0 * microbatches + 2.0 * (l.pp - 1)) * p2p_s;
  }
  if (l.schedule == Schedule::kZeroBubbleH1) exposed_pp_s = 2.0 * (l.pp - 1) * p2p_s;
  if (l.schedule == Schedule::kInterleaved) {
    // Interleaved 1F1B with --overlap-p2p-communication (Narayanan et al. 2021,
    // Sec. 2.2.2; Megatron-Core forward_backward_pipelining_with_interleaving):
    // a micro-batch crosses p·v − 1 virtual-stage boundaries each way, not p − 1,
    // and every chunk switch is a send of the same size (activations do not
    // shrink with the chunk). What is hidden: a send behind the other chunks'
    // compute in the steady state. What is not: the boundaries the first
    // micro-batch's forward and the last one's backward cross while the
    // pipeline fills and drains (each waits for its send), and, once a chunk's
    // forward + backward is shorter than the two sends the stage's link carries
    // for it (one activation forward, one gradient backward), the excess on
    // every chunk of every micro-batch. Both grow with v, so more chunks never
    // cost less in sends.
    const double crossings = static_cast<double>(l.pp) * v - 1.0;
    const double chunk_s = slowest.total() / v;
    exposed_pp_s = 2.0 * crossings * p2p_s +
                   microbatches * v * std::max(0.0, 2.0 * p2p_s - chunk_s);
  }
  return p;
}

PipelinePart pipeline_part(const ModelConfig& m, const ClusterConfig& cluster, const CostProfile& profile,
                           const ParallelLayout& l, const PipelineSplit& split, const StageRates& stage_rates,
                           std::vector<double>* stage_compute_s) {
  return pipeline_part(layer_costs(m, cluster, profile, l, split, stage_rates), l, cluster, m, profile, split,
                       stage_rates, stage_compute_s);
}

// The model with each pipeline stage at its rates (pipeline_part), the
// data-parallel sync of the stage holding most weights and the optimizer at
// the slowest stage's clock.
SimulationResult simulate_at_rates(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l,
                                   const MemoryBreakdown& memory, const PipelineSplit& split,
                                   const StageRates& stage_rates, std::vector<double>* stage_compute_s) {
  SimulationResult r;
  r.layout = l;
  const PipelinePart p = pipeline_part(m, cluster, profile, l, split, stage_rates, stage_compute_s);
  const DeviceRates& rates = p.rates;
  const LinkRates& links = p.links;
  const LayerCosts& dense = p.dense;
  const LayerCosts& moe = p.moe;
  const PassTime& embedding = p.embedding;
  const PassTime& output = p.output;
  const StageTime& slowest = p.slowest;
  const double microbatches = p.microbatches;
  const double v = p.v;

  // Data-parallel sync of the stage holding most weights.
  const StageParams params = largest_stage_params_per_gpu(m, l, split);
  const DataParallelComm dp = data_parallel_comm(params.dense, params.expert, l, cluster, links);
  double exposed_dp_s = 0;
  if (l.zero >= 3) {
    // FSDP / ZeRO-3: per-unit gathers forward and backward and per-unit
    // reduce-scatters, every micro-batch, as far ahead as the implementation
    // prefetches (fsdp_exposure.h).
    auto unit_compute = [&](const LayerCosts& layer) {
      StageTime one;
      add_layers(one, layer, 1, l);
      // Exposed TP/CP/EP split between the passes as the compute is.
      const double share = one.forward_s / std::max(one.forward_s + one.backward_s, 1e-30);
      return UnitCompute{one.forward_s + share * (one.tp_s + one.cp_s + one.ep_s),
                         one.backward_s + (1.0 - share) * (one.tp_s + one.cp_s + one.ep_s)};
    };
    const FsdpStepCompute compute{unit_compute(dense), unit_compute(moe),
                                  {embedding.forward_s, embedding.backward_s},
                                  {output.forward_s, output.backward_s}};
    exposed_dp_s = fsdp_exposed_s(m, l, cluster, links, compute);
  } else {
    // Megatron reduces gradients bucket by bucket during the last micro-batch's
    // backward, and gathers the updated weights during the next step's first
    // forward. With v model chunks per stage each chunk syncs on its own: on the
    // first stage, chunk j finishes its backward p chunk-steps after chunk j+1
    // (micro-batches go round in groups of p; Narayanan et al. 2021, Fig. 4), so
    // earlier chunks' reductions hide behind later chunks' compute. ZeRO-2
    // reduces every micro-batch's gradients (it keeps only its shard).
    const double reductions = l.zero == 2 ? microbatches : 1.0;
    const double grad_s =
        l.overlap_grad_reduce
            ? std::min(dp.grad_reduce_s,
                       exposed_after_chunked_overlap(dp.grad_reduce_s, v, l.pp,
                                                     slowest.backward_s) + dp.bucket_s)
            : dp.grad_reduce_s;
    const double gather_s =
        l.overlap_param_gather
            ? exposed_after_chunked_overlap(dp.param_gather_s, v, l.pp, slowest.forward_s)
            : dp.param_gather_s;
    exposed_dp_s = reductions * grad_s + gather_s;
  }

  // The tied embedding's copies on the first and last stage, reduced after the
  // flush and before the optimizer: exposed whole.
  exposed_dp_s += tied_embedding_reduce_time_s(m, l, cluster, links);

  // With the distributed optimizer each rank updates only its shard.
  const double optimizer_s = p.slowest_slowdown * optimizer_step_time_s(optimizer_params_per_gpu(params, l), rates);

  r.time.compute_s = p.compute_s();
  r.exposed_tp_s = microbatches * slowest.tp_s;
  r.exposed_cp_s = microbatches * slowest.cp_s;
  r.exposed_ep_s = microbatches * slowest.ep_s;
  r.exposed_pp_s = p.exposed_pp_s;
  r.exposed_dp_s = exposed_dp_s;
  r.time.exposed_communication_s = p.exposed_communication_s(exposed_dp_s);
  r.time.pipeline_bubble_s = p.bubble_s;
  r.time.optimizer_s = optimizer_s;
  r.step_time_s = p.step_s(exposed_dp_s, optimizer_s);

  r.memory = memory;
  complete_from_step_time(r, m, cluster);
  return r;
}

}  // namespace

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l) {
  const PipelineSplit split = pipeline_split(m, l);
  return simulate_analytic(m, cluster, profile, l, peak_memory_per_gpu(m, l, split, profile.software), split);
}

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l,
                                   const MemoryBreakdown& memory) {
  return simulate_analytic(m, cluster, profile, l, memory, pipeline_split(m, l));
}

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l,
                                   const MemoryBreakdown& memory, const PipelineSplit& split) {
  return simulate_analytic(m, cluster, profile, l, memory, split, run_conditions(profile, m, l));
}

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l,
                                   const RunConditions& conditions) {
  const PipelineSplit split = pipeline_split(m, l);
  return simulate_analytic(m, cluster, profile, l, peak_memory_per_gpu(m, l, split, profile.software), split,
                           conditions);
}

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l,
                                   const MemoryBreakdown& memory, const PipelineSplit& split,
                                   const RunConditions& conditions) {
  const StageRates at_burst = stage_rates(cluster.gpu, profile, l, conditions.at_burst_clock());
  if (!conditions.power_capped()) return simulate_at_rates(m, cluster, profile, l, memory, split, at_burst, nullptr);
  // The sustained clocks (power_cap.h), from each stage's share of the
  // compute at the burst clock.
  BurstClockLoad load;
  load.hfu = simulate_at_rates(m, cluster, profile, l, memory, split, at_burst, &load.stage_compute_s).hfu;
  return simulate_at_rates(m, cluster, profile, l, memory, split, stage_rates(cluster.gpu, profile, l, conditions, load),
                           nullptr);
}

double step_time_lower_bound_s(const ModelConfig& m, const ClusterConfig& cluster, const CostProfile& profile,
                               const ParallelLayout& l, const PipelineSplit& split) {
  const RunConditions conditions = run_conditions(profile, m, l);
  // Under a power cap the clocks follow the step's own load: no bound here.
  if (conditions.power_capped()) return 0.0;
  const StageRates at_burst = stage_rates(cluster.gpu, profile, l, conditions.at_burst_clock());
  return pipeline_part(m, cluster, profile, l, split, at_burst, nullptr).step_s(0.0, 0.0);
}

bool same_but_data_parallel_sync(const ParallelLayout& a, const ParallelLayout& b, bool recompute_too) {
  bool same = true;
  for_each_knob(a, b, [&](const auto& x, const auto& y) {
    const void* knob = &x;
    if (knob == &a.zero || knob == &a.fsdp || knob == &a.overlap_grad_reduce || knob == &a.overlap_param_gather ||
        (recompute_too && knob == &a.recompute))
      return;
    same = same && x == y;
  });
  return same;
}

struct StepBoundCache::Costs {
  ParallelLayout of;
  PipelinePart part;
};

StepBoundCache::StepBoundCache() = default;
StepBoundCache::~StepBoundCache() = default;

double StepBoundCache::lower_bound_s(const ModelConfig& m, const ClusterConfig& cluster, const CostProfile& profile,
                                     const ParallelLayout& l, const PipelineSplit& split) {
  const RunConditions conditions = run_conditions(profile, m, l);
  if (conditions.power_capped()) return 0.0;  // as step_time_lower_bound_s
  const StageRates at_burst = stage_rates(cluster.gpu, profile, l, conditions.at_burst_clock());
  if (!costs_ || !same_but_data_parallel_sync(costs_->of, l, true)) {
    if (!costs_) costs_ = std::make_unique<Costs>();
    costs_->of = l;
    costs_->part = layer_costs(m, cluster, profile, l, split, at_burst);
  }
  return pipeline_part(costs_->part, l, cluster, m, profile, split, at_burst, nullptr).step_s(0.0, 0.0);
}

}  // namespace sextant::sim
