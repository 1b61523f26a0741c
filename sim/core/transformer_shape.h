// The shape of the transformer sextant's own engine (engine/) trains, from a
// model preset and a layout: every width its kernels and buffers take, the
// head padding of its attention kernels, and the fusions its shape allows —
// derived once, here.
//
// It lives in sim/ because two parts read it and sim/ may not include
// engine/ or kernels/ (DESIGN.md: dependencies point one way): the engine
// (engine/model/transformer_shape.h names it engine::TransformerShape) runs
// these shapes, and the simulator's list of the engine's kernels
// (sim/compute/engine_layer_kernels.cc) costs the same ones. Plain C++.
//
// One shape serves both families DESIGN.md names: GPT (LayerNorm, GELU,
// learned positions, biases) and Llama (RMSNorm, SwiGLU, rotary embeddings,
// grouped-query attention, no biases). The preset's keys choose each feature
// independently, as Megatron's arguments do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// The widest rows (hidden size) whose norm backward runs as one fused pass
/// and so can also sum the bias gradient of the projection that feeds the
/// residual stream. The kernel's own limit is kernels/layernorm.h's
/// kNormBackwardMaxSummedCols (kernels/ may not include sim/);
/// engine/transformer/norm.cc checks at compile time that the two agree.
inline constexpr int kNormSumsResidualBiasMaxHidden = 4096;

struct TransformerShape {
  int num_layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int vocab = 0;  // this rank's rows of the embedding and output layer: padded vocabulary / tp
  int seq = 0;
  int micro_batch = 0;
  bool layernorm = true;          // else RMSNorm
  bool gelu = true;               // else SwiGLU
  bool bias = true;               // biases on every linear layer (Megatron --add-bias-linear)
  bool learned_positions = true;  // else rotary embeddings
  bool tie_embeddings = true;
  float norm_eps = 1e-5f;         // Megatron's --norm-epsilon default
  float rope_theta = 10000.0f;    // Su et al. 2021, eq. 15: the model's rotary_base
  /// Tensor-parallel ranks the shape is one shard of (1: the whole model), and
  /// whether the residual stream and norms are split by tokens over them
  /// (sequence parallelism, Korthikanti et al. 2022, Sec. 4.2.2; tp > 1 only).
  int tp = 1;
  bool sequence_parallel = false;
  /// Context-parallel ranks each sequence is split over (Megatron-Core's
  /// context parallelism): seq above is this rank's share, seq_length / cp,
  /// two chunks of the causally load-balanced split
  /// (engine/model/context_parallel_chunks.h).
  int cp = 1;
  /// How the attention exchanges K and V over cp (layout knob cp_comm_type,
  /// Megatron-Core --cp-comm-type): the ring of point-to-point steps (p2p;
  /// engine/transformer/context_parallel_ring_attention_core.h) or one
  /// all-gather (engine/transformer/context_parallel_attention_core.h). The
  /// layout's value (transformer_shape_of); a shape built by hand gets the
  /// engine's default, all_gather (what `sextant run` executes when the
  /// layout does not say: engine/training/engine_support.h).
  CpCommType cp_comm_type = CpCommType::kAllGather;
  /// Under sequence parallelism: the all-gather before QKV and fc1 and the
  /// reduce-scatter after proj and fc2 pipelined with those GEMMs in tp
  /// chunks (layout knob tp_comm_overlap, Megatron --tp-comm-overlap;
  /// engine/tensor_parallel/overlap_schedule.h). Same results, other timing.
  bool tp_comm_overlap = false;

  /// Mixture of Experts (Megatron-Core's MoELayer, Shazeer et al. 2017): from
  /// layer first_dense_layers on, the MLP block is `experts` SwiGLU or GELU
  /// experts of expert_ffn_hidden each, every token routed to router_topk of
  /// them (kernels/moe_router.h); ep ranks hold local_experts each (Lepikhin et
  /// al. 2021, GShard). experts = 0: every MLP is dense (ffn_hidden).
  int experts = 0;
  int local_experts = 0;
  int router_topk = 0;
  int expert_ffn_hidden = 0;
  int first_dense_layers = 0;
  int ep = 1;
  /// Where the flat parameter buffers change between expert tensors and the
  /// rest, the engine's ParameterLayout starts the next tensor at a multiple of
  /// this (0: its usual 64-element alignment only). With ep > 1 and the
  /// distributed optimizer the two kinds are sharded over different groups
  /// (the expert-data-parallel one and dp: Megatron-Core's separate expert
  /// buffers), each bucket in 8-element blocks per rank
  /// (engine/model/gradient_bucket_plan.h), so each run must start at a
  /// multiple of 8·dp: transformer_shape_of sets that.
  std::size_t expert_run_align_elements = 0;

  bool moe() const { return experts > 0; }
  /// Whether layer `layer` (of the whole model) has an MoE block.
  bool moe_layer(int layer) const { return moe() && layer >= first_dense_layers; }
  /// One expert's first projection: expert_ffn_hidden for GELU, [gate | up] for SwiGLU.
  int expert_fc1_width() const { return gelu ? expert_ffn_hidden : 2 * expert_ffn_hidden; }
  /// (token, choice) pairs this rank routes in a micro-batch: tokens x top-k,
  /// the rows the permutation makes when nothing is dropped.
  std::int64_t routed_pairs() const { return tokens() * router_topk; }
  /// Whether the experts' GEMMs run as one cuBLASLt product per expert rather
  /// than cuBLAS's grouped GEMM (kernels/moe_grouped_gemm.h). The loop pays the
  /// host's launch and setup of each product (10.7 us per expert: the slope of
  /// its time over the expert count at 16-256 rows) but then runs at the dense
  /// GEMM's rate (500-740 TFLOP/s from 1,024 rows per expert), where the
  /// grouped GEMM stayed near 300 TFLOP/s at every size (our H100 measurement,
  /// reports/measurements/2026-11-27-h100-moe-kernels). So the loop is chosen
  /// when an expert's fc1 keeps the GPU busy longer than the host takes to
  /// launch the next at the loop's low end of 500 TFLOP/s: more than
  /// 10.7 us x 500 TFLOP/s = 5.35 GFLOP per expert, at the mean rows.
  bool expert_gemms_in_loop() const {
    constexpr double kLoopHostSecondsPerExpert = 10.7e-6;
    constexpr double kLoopFlopsPerSecond = 500e12;
    const double rows_per_expert = static_cast<double>(routed_pairs()) / local_experts;
    const double fc1_flops_per_expert = 2.0 * rows_per_expert * hidden * expert_fc1_width();
    return fc1_flops_per_expert / kLoopFlopsPerSecond > kLoopHostSecondsPerExpert;
  }

  /// The head dimension the attention kernels run at: 64 or 128, or the head
  /// dimension zero-padded to 128 (kernels/head_copy.h; GPT-3 2.7B's 80).
  int attention_head_dim() const { return head_dim == 64 ? 64 : 128; }
  bool attention_padded() const { return attention_head_dim() != head_dim; }
  int q_width() const { return heads * head_dim; }
  int kv_width() const { return kv_heads * head_dim; }
  /// One token's fused Q, K, V: [Q heads | K heads | V heads].
  int qkv_width() const { return q_width() + 2 * kv_width(); }
  /// The first MLP projection's output: ffn for GELU, [gate | up] for SwiGLU.
  int fc1_width() const { return gelu ? ffn_hidden : 2 * ffn_hidden; }
  std::int64_t tokens() const { return static_cast<std::int64_t>(micro_batch) * seq; }
  /// Rows of the residual stream and the norms on this rank: tokens / tp under
  /// sequence parallelism (rank r holds rows [r·tokens/tp, (r+1)·tokens/tp) of
  /// the micro-batch's (batch, seq) order), else all of them.
  std::int64_t norm_tokens() const { return sequence_parallel ? tokens() / tp : tokens(); }
  /// The first vocabulary row `tp_rank` holds.
  int vocab_start(int tp_rank) const { return tp_rank * vocab; }
  /// Whether the norms' backward sums the bias gradients of proj and fc2 (the
  /// projections that write the residual stream: their gradient is the
  /// column sum of the stream's gradient), so that no bias-gradient pass of
  /// their own runs.
  bool residual_biases_from_norms() const { return bias && hidden <= kNormSumsResidualBiasMaxHidden; }
};

/// One rank's shard under `layout` (heads, query groups and ffn divided by tp,
/// seq by cp), from sim::layer_shape, so the engine's GEMMs are the ones the
/// simulator costs. With tp = cp = 1 it is the whole model.
TransformerShape transformer_shape_of(const ModelConfig& model, const ParallelLayout& layout);

/// The shape of `model` at `micro_batch` sequences of `seq_length` tokens on
/// one GPU.
TransformerShape transformer_shape_of(const ModelConfig& model, int micro_batch, int seq_length);

}  // namespace sextant::sim
