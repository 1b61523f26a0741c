#include "sim/analytic/analytic_model.h"

#include <algorithm>
#include <array>

#include "sim/comm/parallel_comm.h"
#include "sim/compute/device_rates.h"
#include "sim/compute/layer_time.h"
#include "sim/flops/model_flops.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {

std::string_view to_string(Limiter value) {
  switch (value) {
    case Limiter::kCompute: return "compute";
    case Limiter::kTensorParallelComm: return "tensor-parallel communication";
    case Limiter::kContextParallelComm: return "context-parallel communication";
    case Limiter::kExpertParallelComm: return "expert-parallel all-to-all";
    case Limiter::kPipelineComm: return "pipeline send/recv";
    case Limiter::kDataParallelComm: return "data-parallel gradient/parameter sync";
    case Limiter::kPipelineBubble: return "pipeline bubble";
    case Limiter::kOptimizer: return "optimizer step";
  }
  return "?";
}

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
  // Context parallel: each ring step hides behind the attention of the block in
  // hand; only the excess shows (Megatron-Core context parallelism). The attention
  // backward is about twice its forward here.
  const double attention_f = t.attention_core_forward_s;
  const double cp_exposed = std::max(0.0, c.cp_forward_s - attention_f) * (full ? 2.0 : 1.0) +
                            std::max(0.0, c.cp_backward_s - 2.0 * attention_f);
  // Expert parallel all-to-all: on the critical path (no overlap in Megatron-Core 0.8).
  const double ep_exposed = c.ep_forward_s + c.ep_backward_s + (full ? c.ep_forward_s : 0.0);

  stage.forward_s += count * t.forward_s;
  stage.backward_s += count * (t.backward_s + recompute_s);
  stage.weight_gradient_s += count * t.weight_gradient_s;
  stage.tp_s += count * tp_exposed;
  stage.cp_s += count * cp_exposed;
  stage.ep_s += count * ep_exposed;
}

StageTime stage_time(const ModelConfig& m, const ParallelLayout& l, int stage,
                     const LayerCosts& dense, const LayerCosts& moe, const PassTime& embedding,
                     const PassTime& output) {
  const int per_stage = m.num_layers / l.pp;
  const int dense_here = std::clamp(m.dense_layers() - stage * per_stage, 0, per_stage);
  StageTime out;
  add_layers(out, dense, dense_here, l);
  add_layers(out, moe, per_stage - dense_here, l);
  if (stage == 0) {
    out.forward_s += embedding.forward_s;
    out.backward_s += embedding.backward_s;
  }
  if (stage == l.pp - 1) {
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

}  // namespace

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l) {
  return simulate_analytic(m, cluster, profile, l, peak_memory_per_gpu(m, l));
}

SimulationResult simulate_analytic(const ModelConfig& m, const ClusterConfig& cluster,
                                   const CostProfile& profile, const ParallelLayout& l,
                                   const MemoryBreakdown& memory) {
  SimulationResult r;
  r.layout = l;
  const DeviceRates rates = device_rates(cluster.gpu, profile, l.precision);
  const LinkRates links = link_rates(cluster, profile);

  const LayerCosts dense{layer_time(m, l, rates, false), layer_comm(m, l, cluster, links, false)};
  const LayerCosts moe = m.moe ? LayerCosts{layer_time(m, l, rates, true),
                                            layer_comm(m, l, cluster, links, true)}
                               : dense;
  const PassTime embedding = embedding_time(m, l, rates);
  const PassTime output = output_layer_time(m, l, rates);

  // Stages differ only at the ends (embedding, output layer, leading dense layers
  // of a MoE model): simulate the first, the last and one in the middle.
  const StageTime first = stage_time(m, l, 0, dense, moe, embedding, output);
  const StageTime last = l.pp > 1 ? stage_time(m, l, l.pp - 1, dense, moe, embedding, output)
                                  : first;
  const StageTime middle = l.pp > 2 ? stage_time(m, l, l.pp / 2, dense, moe, embedding, output)
                                    : first;
  const std::array<const StageTime*, 3> stages{&first, &middle, &last};
  const StageTime& slowest =
      **std::max_element(stages.begin(), stages.end(),
                         [](const StageTime* a, const StageTime* b) { return a->total() < b->total(); });
  const double all_stages =
      l.pp == 1 ? first.total()
                : first.total() + last.total() + (l.pp - 2) * middle.total();

  const double microbatches = l.num_microbatches();
  const double v = l.schedule == Schedule::kInterleaved ? l.vpp : 1.0;
  double bubble_s = (all_stages - slowest.total()) / v;
  if (l.schedule == Schedule::kZeroBubbleH1) {
    // Qi et al. 2023, Sec. 3.1: ZB-H1's bubble is (p−1)(T_F + T_B − T_W) against
    // 1F1B's (p−1)(T_F + T_B + T_W), T_B the input-gradient and T_W the
    // weight-gradient pass: scale by (t − 2·T_W)/t.
    bubble_s *= std::max(0.0, 1.0 - 2.0 * slowest.weight_gradient_s / slowest.total());
  }

  // Pipeline sends: blocking in 1F1B and GPipe, one activation forward and one
  // gradient backward per micro-batch along the critical path; the interleaved
  // schedule overlaps them with compute except while filling and draining.
  const double p2p_s = pipeline_p2p_time_s(m, l, cluster, links);
  // ZB-H1 sends without blocking as well (Qi et al. 2023's schedule overlaps them).
  const bool overlapped_sends =
      l.schedule == Schedule::kInterleaved || l.schedule == Schedule::kZeroBubbleH1;
  const double exposed_pp_s = overlapped_sends
                                  ? 2.0 * (l.pp - 1) * p2p_s
                                  : 2.0 * (microbatches + l.pp - 1) * p2p_s;

  // Data-parallel sync of the stage holding most weights (first or last).
  const StageParams params_first = stage_params_per_gpu(m, l, 0);
  const StageParams params_last = stage_params_per_gpu(m, l, l.pp - 1);
  const StageParams& params =
      params_first.total() >= params_last.total() ? params_first : params_last;
  const DataParallelComm dp = data_parallel_comm(params.dense, params.expert, l, cluster, links);
  double exposed_dp_s = 0;
  if (l.zero >= 3) {
    // FSDP / ZeRO-3: gather weights for forward and again for backward, reduce-scatter
    // gradients, every micro-batch, prefetched behind that micro-batch's compute.
    const double per_microbatch = 2.0 * dp.param_gather_s + dp.grad_reduce_s;
    exposed_dp_s = microbatches * std::max(0.0, per_microbatch - slowest.total()) + dp.bucket_s;
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

  // With the distributed optimizer each rank updates only its shard.
  const double local_params =
      l.zero >= 1 ? params.dense / (static_cast<double>(l.dp) * l.cp) + params.expert / l.expert_dp()
                 : params.total();
  const double optimizer_s = optimizer_step_time_s(local_params, rates);

  r.time.compute_s = microbatches * (slowest.forward_s + slowest.backward_s);
  r.exposed_tp_s = microbatches * slowest.tp_s;
  r.exposed_cp_s = microbatches * slowest.cp_s;
  r.exposed_ep_s = microbatches * slowest.ep_s;
  r.exposed_pp_s = exposed_pp_s;
  r.exposed_dp_s = exposed_dp_s;
  r.time.exposed_communication_s =
      r.exposed_tp_s + r.exposed_cp_s + r.exposed_ep_s + r.exposed_pp_s + r.exposed_dp_s;
  r.time.pipeline_bubble_s = bubble_s;
  r.time.optimizer_s = optimizer_s;
  r.step_time_s = r.time.compute_s + r.time.exposed_communication_s + r.time.pipeline_bubble_s +
                  r.time.optimizer_s;

  const double gpus = l.total_gpus();
  const double tokens = static_cast<double>(l.gbs) * static_cast<double>(m.seq_length);
  r.tokens_per_s = tokens / r.step_time_s;
  r.tokens_per_s_per_gpu = r.tokens_per_s / gpus;
  const StepFlops flops = step_flops(m, l);
  r.model_flops_per_step = flops.model_flops;
  r.hardware_flops_per_step = flops.hardware_flops;
  const double peak = gpus * cluster.gpu.peak_bf16_flops_per_s * r.step_time_s;
  r.mfu = flops.model_flops / peak;
  r.hfu = flops.hardware_flops / peak;

  r.memory = memory;
  r.fits_memory = r.memory.total() <= static_cast<double>(cluster.gpu.memory_bytes);

  const std::array<std::pair<double, Limiter>, 7> costs{{
      {r.exposed_tp_s, Limiter::kTensorParallelComm},
      {r.exposed_cp_s, Limiter::kContextParallelComm},
      {r.exposed_ep_s, Limiter::kExpertParallelComm},
      {r.exposed_pp_s, Limiter::kPipelineComm},
      {r.exposed_dp_s, Limiter::kDataParallelComm},
      {r.time.pipeline_bubble_s, Limiter::kPipelineBubble},
      {r.time.optimizer_s, Limiter::kOptimizer},
  }};
  const auto worst = std::max_element(costs.begin(), costs.end());
  r.limiter = worst->first > 0.05 * r.step_time_s ? worst->second : Limiter::kCompute;
  return r;
}

}  // namespace sextant::sim
