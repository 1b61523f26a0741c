#include "engine/model/transformer_shape.h"

#include <algorithm>
#include <limits>

#include "kernels/moe_router.h"

namespace sextant::engine {

namespace {

// What the engine's MoE layer (engine/transformer/moe_layer.h) runs: routed
// experts without biases or shared experts, on one tensor-parallel rank, within
// the MoE kernels' limits (kernels/moe_router.h).
template <typename Need>
void moe_shape_problems(const TransformerShape& s, const sim::ModelConfig& model, Need& need) {
  const sim::MoeConfig& moe = *model.moe;
  need(moe.num_experts >= 1 && moe.num_experts <= kernels::kMoeMaxExperts,
       "moe.num_experts " + std::to_string(moe.num_experts) + ": the engine's router takes 1 to " +
           std::to_string(kernels::kMoeMaxExperts));
  need(moe.router_topk >= 1 && moe.router_topk <= std::min(moe.num_experts, kernels::kMoeMaxTopk),
       "moe.router_topk " + std::to_string(moe.router_topk) + ": must be 1 to min(num_experts, " +
           std::to_string(kernels::kMoeMaxTopk) + ")");
  need(s.local_experts * s.ep == s.experts, "ep = " + std::to_string(s.ep) + " must divide moe.num_experts " +
                                                std::to_string(moe.num_experts));
  need(s.expert_ffn_hidden > 0 && s.expert_ffn_hidden % 8 == 0,
       "moe.ffn_hidden_size " + std::to_string(moe.ffn_hidden_size) + " must be a positive multiple of 8");
  need(moe.shared_expert_ffn_hidden_size == 0,
       "moe.shared_expert_ffn_hidden_size: the engine's MoE layer has routed experts only so far; "
       "set it to 0 or simulate this model instead of running it");
  need(!s.bias, "add_bias_linear with MoE layers: the engine's experts have no biases (as Mixtral, Qwen3-MoE "
                "and DeepSeek-V3); set add_bias_linear: false");
  need(s.tp == 1, "tp = " + std::to_string(s.tp) + " with MoE layers: the engine runs MoE models without "
                  "tensor parallelism so far; use tp=1 (dp and pp work)");
  need(model.activation == sim::Activation::kSwiglu || model.activation == sim::Activation::kGelu,
       "the experts' activation: the engine's MoE layer runs SwiGLU or GELU");
}

}  // namespace

std::vector<std::string> transformer_shape_problems(const TransformerShape& s,
                                                    const sim::ModelConfig& model) {
  std::vector<std::string> problems;
  auto need = [&](bool ok, std::string what) {
    if (!ok) problems.push_back(std::move(what));
  };
  if (model.moe) moe_shape_problems(s, model, need);
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
  // Context parallelism: each rank's seq tokens are two equal chunks of the
  // sequence (engine/model/context_parallel_chunks.h); dense models only so far.
  need(s.cp == 1 || model.seq_length % (2 * s.cp) == 0,
       "context parallelism cuts the sequence of " + std::to_string(model.seq_length) + " tokens into 2·cp = " +
           std::to_string(2 * s.cp) + " equal chunks: the sequence length must be a multiple of " +
           std::to_string(2 * s.cp));
  need(s.cp == 1 || !model.moe,
       "cp = " + std::to_string(s.cp) + " with MoE layers: context parallelism of MoE models is not executed yet");
  need(s.micro_batch >= 1, "micro-batch size must be at least 1");
  need(s.seq >= 1, "sequence length must be at least 1");
  // The layer kernels index rows with int: tokens x the widest layer row must stay below
  // 2^31. The output layer's (tokens, vocab) logits are not bound by it: the cross entropy
  // kernels (kernels/cross_entropy.cu, kernels/vocab_parallel_cross_entropy.cu) offset rows
  // in 64 bits and cuBLASLt takes 64-bit matrix layouts (cublasLtMatrixLayoutCreate).
  const std::int64_t widest = std::max<std::int64_t>(s.qkv_width(), s.fc1_width());
  need(s.tokens() * widest <= std::numeric_limits<int>::max(),
       "micro-batch x sequence (" + std::to_string(s.tokens()) + " tokens) x the widest row (" +
           std::to_string(widest) + ") exceeds 2^31 elements; lower the micro-batch");
  return problems;
}

}  // namespace sextant::engine
