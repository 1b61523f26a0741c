#include "sim/event/task_costs.h"

#include <algorithm>
#include <array>

#include "sim/comm/context_ring_overlap.h"
#include "sim/comm/fsdp_comm.h"
#include "sim/comm/parallel_comm.h"
#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "sim/memory/activation_memory.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {

namespace {

constexpr int kPasses = 6;  // Pass values
int index(Pass pass) { return static_cast<int>(pass); }

// Per pass, the duration of each task kind of one layer.
struct LayerCosts {
  std::array<double, kPasses> attention{}, attention_core{}, mlp{};
  std::array<double, kPasses> tp_block{};  // one block's TP collectives
  std::array<double, kPasses> tp_gather{}, tp_scatter{};  // under sp, apart
  std::array<double, kPasses> cp_ring{}, ep_all_to_all{};
  double shared_expert_half_s = 0;  // forward, its own task under moe_shared_expert_overlap
  double stored_bytes = 0;     // kept from the forward to the backward
  double recomputed_bytes = 0; // rebuilt by full recomputation for the backward
};

LayerCosts layer_costs(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& rates,
                       const ClusterConfig& cluster, const LinkRates& links, bool moe_layer) {
  const PassTime t = layer_time(m, l, rates, moe_layer);
  const LayerComm c = layer_comm(m, l, cluster, links, moe_layer);
  const bool core_apart = l.cp > 1;  // the plan gives the core its own task
  const double selective = l.recompute == Recompute::kSelective ? t.attention_core_forward_s : 0.0;
  const double core_f = core_apart ? t.attention_core_run_forward_s : 0.0;
  const double core_b = core_apart ? t.attention_core_backward_s : 0.0;

  LayerCosts out;
  auto set = [](std::array<double, kPasses>& a, double forward, double backward,
                double backward_input, double backward_weight) {
    a[index(Pass::kForward)] = forward;
    a[index(Pass::kRecompute)] = forward;
    a[index(Pass::kBackward)] = backward;
    a[index(Pass::kBackwardInput)] = backward_input;
    a[index(Pass::kBackwardWeight)] = backward_weight;
  };
  const double attention_b = t.attention_backward_s - core_b + (core_apart ? 0.0 : selective);
  set(out.attention, t.attention_forward_s - core_f, attention_b,
      attention_b - t.attention_weight_gradient_s, t.attention_weight_gradient_s);
  if (core_apart) {
    set(out.attention_core, core_f, core_b + selective, core_b + selective, 0.0);
  }
  const double mlp_b = t.backward_s - t.attention_backward_s;
  const double mlp_w = t.weight_gradient_s - t.attention_weight_gradient_s;
  set(out.mlp, t.forward_s - t.attention_forward_s, mlp_b, mlp_b - mlp_w, mlp_w);
  out.mlp[index(Pass::kRecompute)] -= t.full_recompute_skipped_s;
  if (l.moe_shared_expert_overlap && moe_layer && l.ep > 1) {
    // The shared expert's forward leaves the MLP task for two tasks beside the
    // dispatch and the combine (plan_builder.cc: expert_all_to_all).
    out.mlp[index(Pass::kForward)] -= t.shared_expert_forward_s;
    out.shared_expert_half_s = t.shared_expert_forward_s / 2;
  }
  set(out.tp_block, c.tp_forward_s / 2, c.tp_backward_s / 2, c.tp_backward_s / 2, 0.0);
  set(out.tp_gather, c.tp_all_gather_s, c.tp_all_gather_s, c.tp_all_gather_s, 0.0);
  set(out.tp_scatter, c.tp_reduce_scatter_s, c.tp_reduce_scatter_s, c.tp_reduce_scatter_s, 0.0);
  const ContextRingTimes ring = context_ring_task(t, c, l.cp);
  set(out.cp_ring, ring.forward_s, ring.backward_s, ring.backward_s, 0.0);
  set(out.ep_all_to_all, c.ep_forward_s / 2, c.ep_backward_s / 2, c.ep_backward_s / 2, 0.0);
  out.stored_bytes = stored_layer_activation_bytes(m, l, moe_layer);
  if (l.recompute == Recompute::kFull) {
    out.recomputed_bytes = layer_activation_bytes(m, l, moe_layer, false);
  }
  return out;
}

// Activation bytes a stage holds per micro-batch beyond its layers: the
// embedding's dropout mask (first stage) and the output layer's buffers (last
// stage). They are stage_activation_bytes of a one-micro-batch 1F1B layout
// less its layers, so the formulas stay in activation_memory.cc.
double stage_extra_bytes(const ModelConfig& m, const ParallelLayout& l, const PipelineSplit& split,
                         int stage) {
  ParallelLayout one = l;
  one.schedule = Schedule::kOneFOneB;
  one.vpp = 1;
  one.gbs = l.mbs * l.dp;  // one micro-batch: one in flight on every stage
  const StageLayers& here = split.stage(stage);
  double layers = here.dense_layers * stored_layer_activation_bytes(m, one, false) +
                  here.moe_layers() * stored_layer_activation_bytes(m, one, true);
  if (l.recompute == Recompute::kFull && here.num_layers > 0) {
    layers += layer_activation_bytes(m, one, here.moe_layers() > 0, false);
  }
  return stage_activation_bytes(m, one, stage, here) - layers;
}

// What a stage's compute tasks cost at its clock.
struct ClockCosts {
  double clock_slowdown = 1;
  LayerCosts dense, moe;
  PassTime embedding, output;
  double optimizer_step_s = 0;
};

ClockCosts clock_costs(const ModelConfig& m, const ParallelLayout& l, const PipelineSplit& split,
                       const ClusterConfig& cluster, const LinkRates& links, const StageRates& rates, int stage) {
  const DeviceRates r = rates.stage(stage);
  ClockCosts out;
  out.clock_slowdown = rates.clock_slowdown(stage);
  out.dense = layer_costs(m, l, r, cluster, links, false);
  out.moe = m.moe ? layer_costs(m, l, r, cluster, links, true) : out.dense;
  out.embedding = embedding_time(m, l, r);
  out.output = output_layer_time(m, l, r);
  out.optimizer_step_s =
      optimizer_step_time_s(optimizer_params_per_gpu(largest_stage_params_per_gpu(m, l, split), l), r);
  return out;
}

LinkKind link_of(const GroupPlacement& group) {
  if (group.size <= 1) return LinkKind::kNone;
  return group.crosses_nodes() ? LinkKind::kNetwork : LinkKind::kNvlink;
}

}  // namespace

std::vector<TaskCost> task_costs(const Plan& plan, const ModelConfig& m,
                                 const ClusterConfig& cluster, const CostProfile& profile,
                                 const ParallelLayout& l, const StageRates& rates) {
  const LinkRates links = link_rates(cluster, profile);
  // One costing per clock: stages at the same clock share it.
  std::vector<ClockCosts> clocks;
  std::vector<std::size_t> clock_of_stage;
  for (int s = 0; s < plan.num_stages(); ++s) {
    std::size_t c = 0;
    while (c < clocks.size() && clocks[c].clock_slowdown != rates.clock_slowdown(s)) ++c;
    if (c == clocks.size()) clocks.push_back(clock_costs(m, l, plan.shape.split, cluster, links, rates, s));
    clock_of_stage.push_back(c);
  }
  const double p2p_s = pipeline_p2p_time_s(m, l, cluster, links);
  const int n = cluster.gpus_per_node;
  const double tied_s = tied_embedding_reduce_time_s(m, l, cluster, links);
  const LinkKind tied_link =
      l.pp > 1 ? link_of(place_group(2, (l.pp - 1) * l.tp * l.cp * l.dp, n)) : LinkKind::kNone;

  const LinkKind tp_link = link_of(place_group(l.tp, 1, n));
  const LinkKind cp_link = link_of(place_group(l.cp, l.tp, n));
  const LinkKind ep_link = link_of(place_group(l.ep, l.etp, n));
  const LinkKind pp_link =
      l.pp <= 1 ? LinkKind::kNone
                : (l.tp * l.cp * l.dp >= n ? LinkKind::kNetwork : LinkKind::kNvlink);
  const LinkKind dense_dp_link = link_of(place_group(l.dp * l.cp, l.tp, n));
  const LinkKind expert_dp_link = link_of(place_group(l.expert_dp(), l.etp * l.ep, n));
  const double tp_overlapped = l.tp_comm_overlap ? (l.tp - 1.0) / l.tp : 1.0;

  std::vector<DataParallelComm> bucket_comm;
  std::vector<LinkKind> bucket_link;
  bucket_comm.reserve(plan.buckets.size());
  const FsdpBehaviour fsdp = fsdp_behaviour_of(m, l);
  for (const GradientBucket& b : plan.buckets) {
    if (l.zero >= 3) {  // an FSDP unit: fsdp_comm.h, as the analytical model
      const FsdpUnitComm u =
          fsdp_unit_comm({b.dense_params, b.expert_params}, fsdp, l, cluster, links);
      DataParallelComm d;
      d.grad_reduce_s = u.reduce_s;
      d.param_gather_s = u.gather_s;
      bucket_comm.push_back(d);
    } else {
      bucket_comm.push_back(data_parallel_comm(b.dense_params, b.expert_params, l, cluster, links));
    }
    const bool network = (b.dense_params > 0 && dense_dp_link == LinkKind::kNetwork) ||
                         (b.expert_params > 0 && expert_dp_link == LinkKind::kNetwork);
    bucket_link.push_back(network ? LinkKind::kNetwork : LinkKind::kNvlink);
  }
  const double extra_first = stage_extra_bytes(m, l, plan.shape.split, 0);
  const double extra_last = l.pp > 1 ? stage_extra_bytes(m, l, plan.shape.split, l.pp - 1) : 0.0;

  std::vector<TaskCost> out(plan.tasks.size());
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    TaskCost& c = out[i];
    const ClockCosts& clock = clocks[clock_of_stage[static_cast<std::size_t>(t.stage)]];
    const PassTime& embedding = clock.embedding;
    const PassTime& output = clock.output;
    const LayerCosts& layer =
        t.layer != kNoIndex && t.layer >= m.dense_layers() ? clock.moe : clock.dense;
    const int p = index(t.pass);
    switch (t.kind) {
      case TaskKind::kCompute:
        switch (t.block) {
          case Block::kAttention:
            c.duration_s = layer.attention[p];
            // A layer's activations are freed when its gradients are done.
            if (t.pass == Pass::kBackward || t.pass == Pass::kBackwardWeight) {
              c.activation_bytes -= layer.stored_bytes;
            }
            if (t.pass == Pass::kBackward || t.pass == Pass::kBackwardInput) {
              c.activation_bytes -= layer.recomputed_bytes;
            }
            break;
          case Block::kAttentionCore: c.duration_s = layer.attention_core[p]; break;
          case Block::kSharedExpertFc1:
          case Block::kSharedExpertFc2: c.duration_s = layer.shared_expert_half_s; break;
          case Block::kMlp:
            c.duration_s = layer.mlp[p];
            if (t.pass == Pass::kForward) c.activation_bytes = layer.stored_bytes;
            if (t.pass == Pass::kRecompute) c.activation_bytes = layer.recomputed_bytes;
            break;
          case Block::kEmbedding:
            c.duration_s = t.pass == Pass::kForward ? embedding.forward_s : embedding.backward_s;
            // On a single stage the output layer's buffers live as long as the embedding's.
            c.activation_bytes = (t.pass == Pass::kForward ? 1.0 : -1.0) * extra_first;
            break;
          case Block::kOutput:
            c.duration_s = t.pass == Pass::kForward ? output.forward_s : output.backward_s;
            c.activation_bytes = (t.pass == Pass::kForward ? 1.0 : -1.0) * extra_last;
            break;
          case Block::kNone: break;
        }
        break;
      case TaskKind::kTensorParallel:
        c.duration_s = layer.tp_block[p] * tp_overlapped;
        c.link = tp_link;
        break;
      case TaskKind::kTensorParallelTail:
        c.duration_s = layer.tp_block[p] / l.tp;
        c.link = tp_link;
        break;
      case TaskKind::kTensorParallelGather:
        c.duration_s = layer.tp_gather[p];
        c.link = tp_link;
        break;
      case TaskKind::kTensorParallelScatter:
        c.duration_s = layer.tp_scatter[p];
        c.link = tp_link;
        break;
      case TaskKind::kContextRing:
        c.duration_s = layer.cp_ring[p];
        c.link = cp_link;
        break;
      case TaskKind::kExpertDispatch:
      case TaskKind::kExpertCombine:
        c.duration_s = layer.ep_all_to_all[p];
        c.link = ep_link;
        break;
      case TaskKind::kPipelineSend:
      case TaskKind::kPipelineReceive:
        c.duration_s = p2p_s;
        c.link = pp_link;
        break;
      case TaskKind::kGradientReduce:
        c.duration_s = bucket_comm[static_cast<std::size_t>(t.bucket)].grad_reduce_s;
        c.link = bucket_link[static_cast<std::size_t>(t.bucket)];
        break;
      case TaskKind::kParameterGather:
        c.duration_s = bucket_comm[static_cast<std::size_t>(t.bucket)].param_gather_s;
        c.link = bucket_link[static_cast<std::size_t>(t.bucket)];
        break;
      case TaskKind::kTiedEmbeddingReduce:
        c.duration_s = tied_s;
        c.link = tied_link;
        break;
      case TaskKind::kOptimizerStep:
        c.duration_s = clock.optimizer_step_s;
        break;
    }
  }
  return out;
}

}  // namespace sextant::sim
