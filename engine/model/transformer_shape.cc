#include "engine/model/transformer_shape.h"

#include <algorithm>
#include <limits>

namespace sextant::engine {

std::vector<std::string> transformer_shape_problems(const TransformerShape& s,
                                                    const sim::ModelConfig& model) {
  std::vector<std::string> problems;
  auto need = [&](bool ok, std::string what) {
    if (!ok) problems.push_back(std::move(what));
  };
  need(!model.moe, "mixture-of-experts layers: the engine trains dense models only so far");
  need(!model.mla,
       "multi-head latent attention (mla: q_lora_rank, kv_lora_rank, ...): the engine builds "
       "standard and grouped-query attention only; simulate this model instead of running it");
  need(model.activation != sim::Activation::kSquaredRelu,
       "activation squared_relu: the engine has GELU and SwiGLU kernels only so far");
  need(s.head_dim > 0 && s.head_dim <= 128 && s.head_dim % 8 == 0,
       "head dimension (kv_channels) " + std::to_string(s.head_dim) +
           ": the attention kernels take multiples of 8 up to 128 (64 and 128 natively, others "
           "zero-padded to 128)");
  need(s.kv_heads > 0 && s.heads % s.kv_heads == 0,
       "num_query_groups " + std::to_string(s.kv_heads) + " must divide num_attention_heads " +
           std::to_string(s.heads));
  // Every row the kernels touch is moved in 16-byte (8 x bf16) vectors.
  need(s.hidden % 8 == 0, "hidden_size " + std::to_string(s.hidden) + " must be a multiple of 8");
  need(s.ffn_hidden % 8 == 0,
       "ffn_hidden_size " + std::to_string(s.ffn_hidden) + " must be a multiple of 8");
  need(s.vocab % 8 == 0, "vocab_size " + std::to_string(s.vocab) +
                             " must be a multiple of 8 (pad it, as Megatron's "
                             "--make-vocab-size-divisible-by does)");
  need(!s.sequence_parallel || s.tokens() % s.tp == 0,
       "sequence parallelism splits the micro-batch's " + std::to_string(s.tokens()) +
           " tokens over tp = " + std::to_string(s.tp) + " ranks: micro-batch x sequence must be a multiple of tp");
  need(s.micro_batch >= 1, "micro-batch size must be at least 1");
  need(s.seq >= 1, "sequence length must be at least 1");
  // Kernels index rows with int: tokens x the widest row must stay below 2^31.
  const std::int64_t widest = std::max<std::int64_t>({s.vocab, s.qkv_width(), s.fc1_width()});
  need(s.tokens() * widest <= std::numeric_limits<int>::max(),
       "micro-batch x sequence (" + std::to_string(s.tokens()) + " tokens) x the widest row (" +
           std::to_string(widest) + ") exceeds 2^31 elements; lower the micro-batch");
  return problems;
}

}  // namespace sextant::engine
