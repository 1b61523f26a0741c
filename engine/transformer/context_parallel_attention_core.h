// The attention core under context parallelism, all-gather variant (Llama 3,
// Dubey et al. 2024, Sec. 3.3.2): every rank of the cp group all-gathers the
// K and V of the whole sequences, and its own queries — its two chunks of the
// causally load-balanced split (engine/model/context_parallel_chunks.h) —
// attend them with flash attention. A chunk's causal mask over the whole
// sequence is flash attention's bottom-right alignment: chunk j's c queries
// against the first visible_keys(j) keys (kernels/flash_attention.h, kv_seq).
// Each chunk's softmax is over all the keys it sees at once, so, unlike ring
// attention, no log-sum-exp merge is needed.
//
// Backward: K and V are gathered again rather than kept per layer (as
// Megatron-Core's all-gather context parallelism does: the gathered K/V of
// every layer would be cp times a layer's own), each chunk's dK and dV (over
// the keys it saw) are summed in fp32 into the rank-major layout, and a
// reduce-scatter over the cp group (fp32) hands each rank the gradient of
// its own tokens' K and V, rounded once to bf16.
//
// Buffers (one pass's, shared by every layer: BufferReserver::shared), with
// E = micro_batch · S · kv_heads · attention_head_dim, S = cp · seq:
//   the rank-major all-gather of [K | V]           2E bf16
//   K and V in sequence order                      2E bf16
//   each local chunk's dK and dV                   at most 3E bf16 (chunk 0
//                                                  sees <= S/2 keys, chunk 1 <= S)
//   the rank-major fp32 gradients                  2E fp32
//   flash attention's backward workspace           (as the one-GPU core's)
// The all-gather and the reduce-scatter run in place (a rank's own block of
// the rank-major buffer is its send or receive buffer; NCCL allows both).
//
// The LSE (micro_batch · heads · seq floats, as the block reserves it) is laid
// out per chunk: chunk j of sequence b at lse + (2b + j) · heads · c, (heads, c).
#pragma once

#include <cstddef>

#include "engine/model/context_parallel_chunks.h"
#include "engine/transformer/attention_core.h"
#include "engine/transformer/context_parallel_attention_layout.h"
#include "engine/transformer/model_context.h"
#include "kernels/context_parallel_kv.h"
#include "kernels/flash_attention.h"

namespace sextant::engine::transformer {

class ContextParallelAttentionCore : public AttentionCore {
 public:
  /// `context`'s shape must have cp > 1 and seq (this rank's tokens of a
  /// sequence) a positive even number; throws std::invalid_argument otherwise.
  /// Its cp group (ModelContext::cp, set by bind) is used from the first forward on.
  explicit ContextParallelAttentionCore(ModelContext& context);

  /// The buffers above (kActivations; the workspace kOther, as
  /// "workspace.attention", the one-GPU core's name).
  void reserve(BufferReserver& r) override;
  void forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q, const kernels::Bf16* k,
               const kernels::Bf16* v) override;
  void backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv, const kernels::Bf16* dout,
                const kernels::Bf16* q, const kernels::Bf16* k, const kernels::Bf16* v, const kernels::Bf16* out,
                const float* lse) override;

 private:
  /// The cp group; throws std::logic_error when the context has none of the shape's size.
  tensor_parallel::Collectives& group() const;
  /// This rank's chunks of a sequence.
  ContextParallelChunks chunks() const;
  /// k_full_, v_full_ from this rank's k and v: packed into its block of
  /// gathered_, all-gathered, reordered.
  void gather_kv(const ContextParallelChunks& chunks, const kernels::Bf16* k, const kernels::Bf16* v);
  /// The flash attention call of one local chunk of one sequence.
  kernels::FlashAttentionShape chunk_shape(int visible_keys) const;

  ModelContext& context_;
  ContextParallelAttentionLayout layout_;  // heads, strides, the [K | V] block's shape
  int max_visible_keys_[2] = {0, 0};  // over the ranks, per local chunk

  kernels::Bf16* gathered_ = nullptr;             // (cp, 2, micro_batch, seq, kv_width): block r = rank r's [K | V]
  kernels::Bf16* k_full_ = nullptr;               // (micro_batch, S, kv_width)
  kernels::Bf16* v_full_ = nullptr;
  kernels::Bf16* dk_chunk_[2] = {nullptr, nullptr};  // (micro_batch, visible_keys(j), kv_width)
  kernels::Bf16* dv_chunk_[2] = {nullptr, nullptr};
  float* rank_major_ = nullptr;  // (cp, 2, micro_batch, seq, kv_width) fp32
  char* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace sextant::engine::transformer
