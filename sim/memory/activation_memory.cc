#include "sim/memory/activation_memory.h"

#include <algorithm>

#include "sim/core/layer_shape.h"

namespace sextant::sim {

namespace {
constexpr double kBf16Bytes = 2.0;
constexpr double kMaskBytes = 1.0;  // dropout masks are stored as bytes (Korthikanti et al. 2022)
constexpr double kFp32Bytes = 4.0;
constexpr double kFp8Bytes = 1.0;

double tokens_per_gpu(const ModelConfig& m, const ParallelLayout& l) {
  return static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
}
// Tensors of width h that tensor parallelism replicates, unless sequence parallelism splits them.
double replicated_divisor(const ParallelLayout& l) { return l.sp ? l.tp : 1.0; }
}  // namespace

double layer_activation_bytes(const ModelConfig& m, const ParallelLayout& l, bool moe_layer,
                              bool drop_attention_core) {
  const double T = tokens_per_gpu(m, l);
  const double h = static_cast<double>(m.hidden_size);
  const double t = l.tp;
  const double rep = replicated_divisor(l);
  const double q = static_cast<double>(m.query_width());
  const double kv = static_cast<double>(m.kv_width());
  const double v = static_cast<double>(m.value_width());          // kv without MLA
  const double out = static_cast<double>(m.attention_output_width());  // q without MLA
  const double heads = m.num_attention_heads;
  const double s = static_cast<double>(m.seq_length);
  const double hidden_mask = m.hidden_dropout > 0 ? kMaskBytes * T * h / rep : 0.0;
  // FP8 (Transformer Engine, as Megatron-Core and NeMo run it): a GEMM input is
  // kept for the weight gradient in the FP8 copy the forward GEMM read. The
  // fused norm+linear modules keep the norm output in FP8 (LayerNormLinear's and
  // LayerNormMLP's `ln_out`) and LayerNormMLP the activation output (`gelu_out`,
  // fc2's input) in FP8, while the norm's input and fc1's output stay bf16
  // (transformer_engine/pytorch/module/layernorm_mlp.py, ctx.save_for_backward;
  // TE 1.x). The projection keeps an FP8 copy of the attention output besides
  // the bf16 output that flash attention's backward keeps.
  const bool fp8 = l.precision == Precision::kFp8;
  const double gemm_input_bytes = fp8 ? kFp8Bytes : kBf16Bytes;
  const double projection_input_bytes = fp8 ? kBf16Bytes + kFp8Bytes : kBf16Bytes;

  // Attention block (paper: 11·sbh + 5·as²b, plus the norm's input 2·sbh).
  double attention = kBf16Bytes * T * h / rep        // norm input
                     + gemm_input_bytes * T * h / rep  // QKV GEMM input (norm output)
                     + kBf16Bytes * T * (q + kv + v) / t  // Q, K, V
                     + projection_input_bytes * T * out / t  // projection input (attention output)
                     + hidden_mask;                  // dropout mask after the projection
  if (m.mla) {
    // Multi-head latent attention (Megatron-Core MLASelfAttention): the down
    // projections run on this rank's tokens (T/tp under sp; duplicated weights),
    // and keep their latent outputs as the latent norms' inputs; the norms'
    // outputs are the up projections' inputs (column-parallel: each keeps its
    // sequence shard and gathers it again for the backward). Q, K and V above
    // are the up projections' outputs, as flash attention keeps them.
    const MlaConfig& a = *m.mla;
    const double latents = static_cast<double>(a.q_lora_rank + a.kv_lora_rank);
    attention += (kBf16Bytes + gemm_input_bytes) * T * latents / rep;
  }
  if (l.attention == AttentionKernel::kFlash) {
    attention += kFp32Bytes * T * heads / t;  // softmax log-sum-exp per query row
  } else if (!drop_attention_core) {
    // Softmax output (2), its dropout mask (1) and dropout output (2) per score.
    const double per_score = m.attention_dropout > 0 ? 2 * kBf16Bytes + kMaskBytes : kBf16Bytes;
    attention += per_score * T * s * heads / t;
  }

  // MLP block (paper: 19·sbh for GeLU with f = 4h, plus the norm's input 2·sbh).
  double mlp = kBf16Bytes * T * h / rep + hidden_mask;  // norm input, dropout mask
  // fc1 input (h wide, split by `input_divisor`), activation input (one or two
  // ffn-wide GEMM outputs) and fc2 input, the ffn width split by `width_divisor`.
  auto mlp_tensors = [&](double ffn, double tokens, double width_divisor, double input_divisor) {
    if (ffn <= 0) return 0.0;
    return gemm_input_bytes * tokens * h / input_divisor +
           kBf16Bytes * tokens * ffn * m.mlp_input_projections() / width_divisor +
           gemm_input_bytes * tokens * ffn / width_divisor;
  };
  if (moe_layer && m.moe) {
    const MoeConfig& e = *m.moe;
    // Tokens this GPU's experts see: T·topk·etp/tp with balanced routing (each
    // of the tp·cp·dp ranks' tokens visits topk experts spread over ep groups).
    const double expert_tokens = T * e.router_topk * l.etp / t * e.expert_load_factor;
    mlp += kBf16Bytes * T * h / rep;  // router input
    mlp += mlp_tensors(static_cast<double>(e.ffn_hidden_size), expert_tokens, l.etp, 1.0);
    mlp += mlp_tensors(static_cast<double>(e.shared_expert_ffn_hidden_size), T, t, rep);
  } else {
    mlp += mlp_tensors(static_cast<double>(m.ffn_hidden_size), T, t, rep);
  }
  return attention + mlp;
}

double stored_layer_activation_bytes(const ModelConfig& m, const ParallelLayout& l,
                                     bool moe_layer) {
  switch (l.recompute) {
    case Recompute::kFull:
      // Only the layer's input (Korthikanti et al. 2022, Sec. 4.3: 2·sbh).
      return kBf16Bytes * tokens_per_gpu(m, l) * static_cast<double>(m.hidden_size) /
             replicated_divisor(l);
    case Recompute::kSelective:
      return layer_activation_bytes(m, l, moe_layer, true);
    case Recompute::kNone:
      break;
  }
  return layer_activation_bytes(m, l, moe_layer, false);
}

double first_stage_inflight_microbatches(const ParallelLayout& l) {
  const double m = l.num_microbatches();
  const double p = l.pp;
  switch (l.schedule) {
    case Schedule::kGpipe:
      return m;
    case Schedule::kOneFOneB:
    case Schedule::kZeroBubbleH1:  // ZB-H1 keeps 1F1B's peak (Qi et al. 2023, Sec. 3.1)
      // moe_a2a_overlap with pp = 1: the combined step runs micro-batch i+1's
      // forward beside i's backward, so two are alive (combined_1f1b.py).
      return std::min(p + (l.moe_a2a_overlap && l.pp == 1 ? 1.0 : 0.0), m);
    case Schedule::kInterleaved:
      // moe_a2a_overlap adds one warm-up chunk-forward (pipeline_schedule.h): 1/v more.
      return std::min(p * (1.0 + (p - 1.0) / (p * l.vpp)) + (l.moe_a2a_overlap ? 1.0 / l.vpp : 0.0),
                      m);
  }
  return p;
}

double stage_activation_bytes(const ModelConfig& m, const ParallelLayout& l, int stage) {
  return stage_activation_bytes(m, l, stage, pipeline_split(m, l).stage(stage));
}

double stage_activation_bytes(const ModelConfig& m, const ParallelLayout& l, int stage,
                              const StageLayers& layers) {
  const int dense_here = layers.dense_layers;
  const int moe_here = layers.moe_layers();
  const double per_microbatch = dense_here * stored_layer_activation_bytes(m, l, false) +
                                moe_here * stored_layer_activation_bytes(m, l, true);
  // Stage k of 1F1B holds (p − k) micro-batches at its peak (Narayanan et al. 2021, Fig. 4).
  const double first_stage = first_stage_inflight_microbatches(l);
  // GPipe holds every micro-batch on every stage; ZB-H1 holds p on every stage
  // (deferred weight-gradient passes keep later stages' activations alive).
  const double inflight = l.schedule == Schedule::kGpipe || l.schedule == Schedule::kZeroBubbleH1
                              ? first_stage
                              : std::max(1.0, first_stage * (l.pp - stage) / l.pp);
  double bytes = per_microbatch * inflight;

  const double T = tokens_per_gpu(m, l);
  const double h = static_cast<double>(m.hidden_size);
  if (l.recompute == Recompute::kFull && layers.num_layers > 0) {
    // The layer being recomputed holds all its activations during its backward.
    bytes += layer_activation_bytes(m, l, moe_here > 0, false);
  }
  if (layers.embedding && m.hidden_dropout > 0) {
    bytes += kMaskBytes * T * h / replicated_divisor(l) * inflight;  // embedding dropout mask
  }
  if (layers.loss) {
    // Final norm input and output-layer input, and the fp32 softmax of the
    // vocabulary-parallel cross entropy kept for its backward (one micro-batch:
    // the last stage runs each backward right after its forward).
    bytes += 2 * kBf16Bytes * T * h / replicated_divisor(l);
    bytes += kFp32Bytes * T * vocab_rows_per_rank(m, l.tp);
  }
  return bytes;
}

}  // namespace sextant::sim
