#include "sim/memory/context_parallel_buffers.h"

namespace sextant::sim {

namespace {
constexpr double kBf16 = 2, kFp32 = 4;
}  // namespace

double context_parallel_core_bytes(const ModelConfig& m, const ParallelLayout& l) {
  return context_parallel_core_parts(m, l).total();
}

ContextParallelCoreBytes context_parallel_core_parts(const ModelConfig& m, const ParallelLayout& l,
                                                     Software software) {
  if (l.cp <= 1) return {};
  const double b = l.mbs, S = static_cast<double>(m.seq_length), c = S / (2.0 * l.cp);
  const double heads = static_cast<double>(m.num_attention_heads) / l.tp;
  // Heads as flash attention runs them: 64 or padded to 128 (TransformerShape::attention_head_dim).
  const double head_dim = m.qk_head_dim() == 64 ? 64 : 128;
  const double q_width = heads * head_dim;
  const double kv_width = static_cast<double>(m.num_query_groups) / l.tp * head_dim;
  const bool gqa = m.num_query_groups < m.num_attention_heads;
  // Flash backward workspace of a call of c queries and `keys` keys (batch 1).
  auto workspace = [&](double keys) {
    const double generic = kFp32 * (c * q_width + heads * c);
    return generic + (gqa && head_dim != 128 ? 4 * kBf16 * keys * q_width : 0.0);
  };
  if (l.cp_comm_type == CpCommType::kAllGather) {
    const double E = b * S * kv_width;
    return {kBf16 * 2 * E + kBf16 * 2 * E + kBf16 * 3 * E + kFp32 * 2 * E, workspace(S)};
  }
  const double local = b * 2 * c;  // this rank's tokens
  const double kv_block = 2 * local * kv_width;  // [K | V] elements
  if (software == Software::kSextantEngine) {
    // engine/transformer/context_parallel_ring_attention_core.cc reserve(): one
    // fp32 (local, q_width) buffer serves the out accumulator in the forward and
    // dQ in the backward ("cp.ring.q_fp32"); the partial out has the query rows'
    // stride (the fused QKV rows unless the heads are padded), the partial dK and
    // dV are 3c rows each (both chunks' calls). Measured: 128 MiB less than two
    // fp32 buffers at Llama 3.2 1B 32k cp=2, the arena's difference (2026-11-28-h200-cp-ring/two-gpu-2).
    const double q_row_stride =
        head_dim == m.qk_head_dim() ? q_width + 2 * kv_width : q_width;  // TransformerShape::qkv_width when unpadded
    return {2 * kBf16 * kv_block                              // "cp.ring.kv": two receive buffers
                + kFp32 * local * q_width                     // "cp.ring.q_fp32"
                + kBf16 * c * q_row_stride + kFp32 * heads * c  // "cp.ring.partial_q", "cp.ring.partial_lse"
                + kBf16 * 2 * b * 3 * c * kv_width            // "cp.ring.partial_kv"
                + 2 * kFp32 * kv_block,                       // "cp.ring.grad_kv_fp32"
            workspace(2 * c)};
  }
  // Transformer Engine's ring (Megatron-Core): the out accumulator and dQ apart.
  return {2 * kBf16 * kv_block                           // two receive buffers
         + kFp32 * local * q_width                       // out accumulator
         + kBf16 * c * q_width + kFp32 * heads * c       // partial out and LSE
         + kFp32 * local * q_width                       // dQ
         + 2 * kFp32 * kv_block                          // travelling dK/dV accumulators
         + kBf16 * 2 * (2 * c) * kv_width + kBf16 * c * q_width,  // partial dK/dV, dQ
          workspace(2 * c)};
}

}  // namespace sextant::sim
