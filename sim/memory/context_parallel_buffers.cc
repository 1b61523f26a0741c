#include "sim/memory/context_parallel_buffers.h"

namespace sextant::sim {

namespace {
constexpr double kBf16 = 2, kFp32 = 4;
}  // namespace

double context_parallel_core_bytes(const ModelConfig& m, const ParallelLayout& l) {
  if (l.cp <= 1) return 0;
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
    return kBf16 * 2 * E + kBf16 * 2 * E + kBf16 * 3 * E + kFp32 * 2 * E + workspace(S);
  }
  const double local = b * 2 * c;  // this rank's tokens
  const double kv_block = 2 * local * kv_width;  // [K | V] elements
  return 2 * kBf16 * kv_block                            // two receive buffers
         + kFp32 * local * q_width                       // out accumulator
         + kBf16 * c * q_width + kFp32 * heads * c       // partial out and LSE
         + kFp32 * local * q_width                       // dQ
         + 2 * kFp32 * kv_block                          // travelling dK/dV accumulators
         + kBf16 * 2 * (2 * c) * kv_width + kBf16 * c * q_width  // partial dK/dV, dQ
         + workspace(2 * c);
}

}  // namespace sextant::sim
