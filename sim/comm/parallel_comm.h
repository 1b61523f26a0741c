// Communication of each parallel dimension: which collectives, how many bytes,
// over which group, and how long they take on the cluster's links.
//
// Groups are placed by the rank order tp-cp-ep-dp-pp (Megatron-Core): a TP
// group is tp consecutive ranks, a CP group has stride tp, a DP group stride
// tp·cp, consecutive pipeline stages are tp·cp·dp ranks apart. Expert layers
// fold the same ranks as etp-ep-edp (Megatron MoE parallel folding).
#pragma once

#include "sim/comm/collective_cost.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

LinkRates link_rates(const ClusterConfig& cluster, const CostProfile& profile);

/// Bytes per parameter of a gradient reduction: Megatron reduces in fp32 when
/// training in bf16 (arguments.py: --bf16 sets accumulate_allreduce_grads_in_fp32),
/// in fp16 under --fp16.
double gradient_reduce_bytes_per_param(Precision precision);

/// Communication of one layer for one micro-batch, in seconds, if nothing overlapped it.
struct LayerComm {
  double tp_forward_s = 0;   // 2 all-reduces, or 2 all-gathers + 2 reduce-scatters under sp
  double tp_backward_s = 0;  // the same volume again
  // Under sp, one block's two collectives apart (each direction has one of
  // each per block): tp_forward_s = 2 (tp_all_gather_s + tp_reduce_scatter_s).
  double tp_all_gather_s = 0;
  double tp_reduce_scatter_s = 0;
  // cp_comm_type=p2p: the K/V ring (cp−1 steps), overlapped with the core;
  // all_gather: the K/V all-gather (backward: again, and the reduce-scatter of
  // dK/dV), before and after the core, not overlapped (cp_overlaps_core false).
  double cp_forward_s = 0;
  double cp_backward_s = 0;
  bool cp_overlaps_core = true;
  // p2p, one exchange: this rank's [K | V] (bf16), and, for the engine's ring
  // (LinkRates::engine_context_ring), one hop of a dK/dV accumulator (fp32; 0
  // where dK/dV ride with K/V). How they hide: context_ring_overlap.h.
  double cp_kv_exchange_s = 0;
  double cp_gradient_exchange_s = 0;
  double ep_forward_s = 0;   // token dispatch + combine all-to-all
  double ep_backward_s = 0;
};
LayerComm layer_comm(const ModelConfig& model, const ParallelLayout& layout,
                     const ClusterConfig& cluster, const LinkRates& rates, bool moe_layer);

/// Point-to-point send of one micro-batch's activations (or their gradients)
/// between adjacent pipeline stages. With the scatter-gather optimisation each of
/// the tp ranks sends 1/tp of it (Narayanan et al. 2021, Sec. 4.1).
double pipeline_p2p_time_s(const ModelConfig& model, const ParallelLayout& layout,
                           const ClusterConfig& cluster, const LinkRates& rates);

/// The all-reduce of the tied word embedding's gradient between the first and
/// the last pipeline stage, each holding a copy of its V·h/tp shard, once per
/// step after the gradients' data-parallel reduction and before the optimizer
/// (Megatron finalize_model_grads: _allreduce_word_embedding_grads; DeepSpeed
/// schedule.py: ReduceTiedGrads). Nothing overlaps it. 0 when untied or pp = 1.
double tied_embedding_reduce_time_s(const ModelConfig& model, const ParallelLayout& layout,
                                    const ClusterConfig& cluster, const LinkRates& rates);

/// Data-parallel synchronisation of one stage's gradients and parameters per step.
struct DataParallelComm {
  double grad_reduce_s = 0;   // all-reduce (zero 0) or reduce-scatter (zero >= 1)
  double param_gather_s = 0;  // all-gather of updated bf16 weights (zero >= 1)
  double bucket_s = 0;        // one gradient bucket: what cannot hide behind compute
};
/// `dense_params` and `expert_params` are what one GPU of the stage holds.
DataParallelComm data_parallel_comm(double dense_params, double expert_params,
                                    const ParallelLayout& layout, const ClusterConfig& cluster,
                                    const LinkRates& rates);

}  // namespace sextant::sim
