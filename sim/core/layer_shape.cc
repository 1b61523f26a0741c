#include "sim/core/layer_shape.h"

namespace sextant::sim {

double vocab_rows_per_rank(const ModelConfig& model, int tp) {
  return static_cast<double>(padded_vocab_size(model.vocab_size, tp)) / tp;
}

std::int64_t padded_vocab_size(std::int64_t vocab_size, int tp) {
  if (tp <= 1) return vocab_size;
  constexpr std::int64_t kDivisibleBy = 128;  // Megatron's --make-vocab-size-divisible-by default
  const std::int64_t multiple = kDivisibleBy * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

LayerShape layer_shape(const ModelConfig& m, const ParallelLayout& l) {
  LayerShape s;
  s.tp = l.tp;
  s.sp = l.sp;
  s.hidden = m.hidden_size;
  s.head_dim = m.kv_channels;
  s.heads = m.num_attention_heads / l.tp;
  s.kv_heads = m.num_query_groups / l.tp;
  s.ffn = m.ffn_hidden_size / l.tp;
  s.swiglu = m.activation == Activation::kSwiglu;
  s.tokens = static_cast<std::int64_t>(l.mbs) * m.seq_length / l.cp;
  return s;
}

}  // namespace sextant::sim
