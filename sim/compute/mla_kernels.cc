#include "sim/compute/mla_kernels.h"

#include "sim/compute/pass_time_terms.h"

namespace sextant::sim {

namespace {
constexpr double kBf16Bytes = 2.0;
}  // namespace

// DeepSeek-V2 (arXiv:2405.04434) eqs. 9-17, n heads, tensor parallel size t, T
// tokens of the micro-batch on this rank:
//  - the down projections c_Q = W^DQ h (eq. 12) and [c_KV | k^R] = [W^DKV; W^KR] h
//    (eqs. 9, 15) have their weights on every rank (duplicated TELinear) and run
//    on the rank's own rows: T/t under sequence parallelism, else all T (each
//    rank repeats them);
//  - the latent RMSNorms (q_layernorm, kv_layernorm): read and write 2 bytes per element;
//  - the up projections q = W^UQ c_Q (eqs. 13-14) and [k^C | v^C] = W^UKV c_KV
//    (eqs. 10-11) are column-parallel: n/t heads over all T rows;
//  - RoPE on q^R and k^R and the concatenations [q^C; q^R], [k^C; k^R] in two
//    fused kernels (Megatron-Core fused_mla_yarn_rope_apply: one for the query,
//    reading and writing it, one reading the up-projected key-value and k^R and
//    writing K and V).
void add_mla_projections(PassTime& t, const ModelConfig& m, const ParallelLayout& l,
                         const DeviceRates& r) {
  const MlaConfig& a = *m.mla;
  const double T = static_cast<double>(l.mbs) * static_cast<double>(m.seq_length) / l.cp;
  const double own_rows = l.sp ? T / l.tp : T;
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_attention_heads) / l.tp;
  const double qk = m.qk_head_dim();
  const double v = a.v_head_dim;
  const double q_rank = static_cast<double>(a.q_lora_rank);
  const double kv_rank = static_cast<double>(a.kv_lora_rank);

  if (q_rank > 0) {
    add_linear(t, own_rows, q_rank, h, 1, r);                    // W^DQ
    add_elementwise(t, 2.0 * kBf16Bytes * own_rows * q_rank, 1, r);  // q_layernorm
    add_linear(t, T, heads * qk, q_rank, 1, r);                  // W^UQ (with W^QR)
  } else {
    add_linear(t, T, heads * qk, h, 1, r);                       // W^Q (no query latent)
  }
  add_linear(t, own_rows, kv_rank + a.qk_rope_head_dim, h, 1, r);  // W^DKV with W^KR
  add_elementwise(t, 2.0 * kBf16Bytes * own_rows * kv_rank, 1, r);   // kv_layernorm
  add_linear(t, T, heads * (a.qk_nope_head_dim + v), kv_rank, 1, r);  // W^UK with W^UV
  const double query_bytes = 2.0 * kBf16Bytes * T * heads * qk;
  const double key_value_bytes =
      kBf16Bytes * T * (heads * (a.qk_nope_head_dim + v) + a.qk_rope_head_dim + heads * (qk + v));
  add_elementwise(t, query_bytes + key_value_bytes, 2, r);
}

double attention_tp_entry_width(const ModelConfig& m) {
  if (!m.mla) return static_cast<double>(m.hidden_size);
  const MlaConfig& a = *m.mla;
  const double query = a.q_lora_rank > 0 ? static_cast<double>(a.q_lora_rank)
                                         : static_cast<double>(m.hidden_size);
  return query + static_cast<double>(a.kv_lora_rank) + a.qk_rope_head_dim;
}

}  // namespace sextant::sim
