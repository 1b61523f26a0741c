#include "sim/comm/parallel_comm.h"

#include <algorithm>

#include "sim/compute/mla_kernels.h"

namespace sextant::sim {

namespace {
constexpr double kBf16Bytes = 2.0;
constexpr double kFp32Bytes = 4.0;
// Megatron-Core DDP default bucket: 40M parameters (--ddp-bucket-size, 2024).
constexpr double kBucketParams = 40e6;
}  // namespace

double gradient_reduce_bytes_per_param(Precision precision) {
  return precision == Precision::kFp16 ? 2.0 : 4.0;
}

LinkRates link_rates(const ClusterConfig& c, const CostProfile& p) {
  return {c.intra_node_bandwidth_bytes_per_s * p.nvlink_efficiency,
          c.inter_node_bandwidth_bytes_per_s * p.network_efficiency, c.intra_node_latency_s,
          c.inter_node_latency_s, p.collective_launch_s, p.software == Software::kSextantEngine};
}

LayerComm layer_comm(const ModelConfig& m, const ParallelLayout& l, const ClusterConfig& c,
                     const LinkRates& r, bool moe_layer) {
  LayerComm out;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double h = static_cast<double>(m.hidden_size);
  const int n = c.gpus_per_node;
  if (l.tp > 1) {
    const GroupPlacement tp = place_group(l.tp, 1, n);
    const double activation = kBf16Bytes * T * h;
    // Shoeybi et al. 2019: an all-reduce after the attention and the MLP block
    // (f and g operators) forward, two more in backward. Korthikanti et al.
    // 2022, Sec. 4.2.2: sequence parallelism turns each into an all-gather plus
    // a reduce-scatter of the same total volume.
    if (l.sp) {
      out.tp_all_gather_s = all_gather_time_s(activation, tp, r);
      out.tp_reduce_scatter_s = reduce_scatter_time_s(activation, tp, r);
    }
    const double per_op = l.sp ? out.tp_all_gather_s + out.tp_reduce_scatter_s
                               : all_reduce_time_s(activation, tp, r);
    out.tp_forward_s = 2.0 * per_op;
    out.tp_backward_s = 2.0 * per_op;
    if (m.mla) {
      // Multi-head latent attention enters the tensor-parallel region after its
      // replicated down projections (mla_kernels.h): the attention block's
      // all-gather (sp) or backward all-reduce moves the latents, not h.
      const double entry = kBf16Bytes * T * attention_tp_entry_width(m);
      if (l.sp) {
        const double attention_op =
            all_gather_time_s(entry, tp, r) + reduce_scatter_time_s(activation, tp, r);
        out.tp_forward_s = per_op + attention_op;
        out.tp_backward_s = per_op + attention_op;
      } else {
        out.tp_backward_s = per_op + all_reduce_time_s(entry, tp, r);
      }
    }
  }
  if (l.cp > 1) {
    const GroupPlacement cp = place_group(l.cp, l.tp, n);
    // This rank's K and V (its T tokens, its tp share of the heads).
    const double kv_elements = T * static_cast<double>(m.kv_width() + m.value_width()) / l.tp;
    if (l.cp_comm_type == CpCommType::kAllGather) {
      // Llama 3 (Dubey et al. 2024, Sec. 3.3.2), as the engine runs it
      // (engine/transformer/context_parallel_attention_core.h): K/V of the
      // whole sequence all-gathered before the core; in the backward gathered
      // again (not kept), and dK/dV, summed in fp32, reduce-scattered home.
      const double gathered_bf16 = kBf16Bytes * kv_elements * l.cp;
      const double gradients_fp32 = 4.0 * kv_elements * l.cp;
      out.cp_forward_s = all_gather_time_s(gathered_bf16, cp, r);
      out.cp_backward_s = out.cp_forward_s + reduce_scatter_time_s(gradients_fp32, cp, r);
      out.cp_overlaps_core = false;
    } else {
      // Ring attention (Liu et al. 2023; Megatron-Core context parallel): this
      // rank's K and V passed on cp−1 times, each beside one step of the core.
      out.cp_kv_exchange_s = p2p_time_s(kBf16Bytes * kv_elements, cp.crosses_nodes(), r);
      out.cp_forward_s = (l.cp - 1) * out.cp_kv_exchange_s;
      if (r.engine_context_ring) {
        // The engine's backward (engine/transformer/context_parallel_ring_attention_core.h):
        // K and V again, and each source's fp32 dK/dV accumulator one hop
        // behind them, cp hops (the last brings it home).
        out.cp_gradient_exchange_s = p2p_time_s(kFp32Bytes * kv_elements, cp.crosses_nodes(), r);
        out.cp_backward_s = (l.cp - 1) * out.cp_kv_exchange_s + l.cp * out.cp_gradient_exchange_s;
      } else {
        // Transformer Engine's AttnFuncWithCPAndKVP2P.backward (pytorch/attention/
        // dot_product_attention/context_parallel.py, non-FP8): one buffer of
        // kv's dtype (bf16) holds [kv, dkv]; step 0 sends kv, steps 1..cp−2 both,
        // the last dkv, so K/V and dK/dV each travel cp−1 times in bf16.
        out.cp_backward_s = 2.0 * (l.cp - 1) * out.cp_kv_exchange_s;
      }
    }
  }
  if (moe_layer && m.moe && l.ep > 1) {
    // Dispatch and combine: each token's hidden state to and from its topk experts
    // (Lepikhin et al. 2020, GShard); backward mirrors both. The all-to-all ends
    // when the busiest rank has its expert_load_factor times the mean.
    const GroupPlacement ep = place_group(l.ep, l.etp, n);
    const double bytes = kBf16Bytes * T * m.moe->router_topk * h * l.etp / l.tp *
                         m.moe->expert_load_factor;
    out.ep_backward_s = 2.0 * all_to_all_time_s(bytes, ep, r);
    // The forward first exchanges each rank's rows per expert (4-byte counts),
    // which the receivers need to size their buffers and GEMMs (Megatron-Core's
    // MoEAlltoAllTokenDispatcher.preprocess gathers them over the ep group; our
    // engine's moe_layer.cc all-to-alls them): a latency-bound collective.
    const double counts_bytes = 4.0 * m.moe->num_experts;
    out.ep_forward_s = out.ep_backward_s + all_to_all_time_s(counts_bytes, ep, r);
  }
  return out;
}

double pipeline_p2p_time_s(const ModelConfig& m, const ParallelLayout& l, const ClusterConfig& c,
                           const LinkRates& r) {
  if (l.pp <= 1) return 0.0;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double bytes = kBf16Bytes * T * static_cast<double>(m.hidden_size) / l.tp;
  // Adjacent stages are tp·cp·dp ranks apart: on another node once that is a node or more.
  return p2p_time_s(bytes, l.tp * l.cp * l.dp >= c.gpus_per_node, r);
}

double tied_embedding_reduce_time_s(const ModelConfig& m, const ParallelLayout& l,
                                    const ClusterConfig& c, const LinkRates& r) {
  if (!m.tie_embeddings || l.pp <= 1) return 0.0;
  const double shard = static_cast<double>(m.vocab_size) * m.hidden_size / l.tp;
  // The two ends of a pipeline are (pp − 1)·tp·cp·dp ranks apart.
  const GroupPlacement ends = place_group(2, (l.pp - 1) * l.tp * l.cp * l.dp, c.gpus_per_node);
  return all_reduce_time_s(l.gradient_bytes_per_param() * shard, ends, r);
}

DataParallelComm data_parallel_comm(double dense_params, double expert_params,
                                    const ParallelLayout& l, const ClusterConfig& c,
                                    const LinkRates& r) {
  DataParallelComm out;
  const int n = c.gpus_per_node;
  auto sync = [&](double params, const GroupPlacement& group) {
    if (group.size <= 1 || params <= 0) return;
    const double grads = l.gradient_bytes_per_param() * params;
    if (l.zero == 0) {
      out.grad_reduce_s += all_reduce_time_s(grads, group, r);
    } else {
      out.grad_reduce_s += reduce_scatter_time_s(grads, group, r);
      out.param_gather_s += all_gather_time_s(kBf16Bytes * params, group, r);
    }
    const double bucket_grads = l.gradient_bytes_per_param() * std::min(params, kBucketParams);
    out.bucket_s = std::max(out.bucket_s, l.zero == 0 ? all_reduce_time_s(bucket_grads, group, r)
                                                      : reduce_scatter_time_s(bucket_grads, group, r));
  };
  // Dense weights are reduced over data- and context-parallel ranks (stride tp),
  // expert weights over expert-data-parallel ranks (stride etp·ep).
  sync(dense_params, place_group(l.dp * l.cp, l.tp, n));
  sync(expert_params, place_group(l.expert_dp(), l.etp * l.ep, n));
  return out;
}

}  // namespace sextant::sim
