// The attention core under context parallelism, ring variant (cp_comm_type=p2p):
// ring attention (Liu et al. 2023, "Ring Attention with Blockwise
// Transformers", Sec. 3) with the causally load-balanced split of
// Megatron-Core / Transformer Engine context parallelism (rank r holds chunks
// r and 2·cp−1−r: engine/model/context_parallel_chunks.h). Sibling of the
// all-gather core (context_parallel_attention_core.h): same interface, same
// LSE layout, same shared-buffer habits.
//
// The ring. Each rank packs its own K and V into one [K | V] block; at step
// i = 0..cp−1 rank r holds source s = (r − i) mod cp's block, and while the
// step's attention runs the block moves on (sent to r+1, the next one received
// from r−1 into the other of two buffers: double buffering). Per sequence b,
// with c = seq / 2 tokens per chunk, q0 = chunk r, q1 = chunk 2cp−1−r,
// k_s0 = chunk s, k_s1 = chunk 2cp−1−s, the step's flash attention calls
// (kernels/flash_attention.h; every call has c query rows):
//   s = r:  q0 vs k_s0           causal      kv_seq c   (square)
//           q1 vs [k_s0, k_s1]   causal      kv_seq 2c  (bottom-right aligned)
//   s < r:  q0 vs k_s0           non-causal  kv_seq c
//           q1 vs k_s0           non-causal  kv_seq c
//   s > r:  q1 vs [k_s0, k_s1]   non-causal  kv_seq 2c
// (s < r: s < r < cp <= 2cp−1−r < 2cp−1−s, so q0 sees k_s0 wholly and not k_s1,
// q1 sees k_s0 wholly and not k_s1; s > r: q0 = chunk r < s sees neither, q1 =
// chunk 2cp−1−r > 2cp−1−s >= cp > s sees both wholly.) Every step but step 0
// does the same work on every rank: the reason for the split.
//
// Forward: each call's partial output (bf16) and LSE are merged into an fp32
// output and the block's LSE by their log-sum-exps (kernels/attention_merge.h;
// Milakov & Gimelshein 2018, Eq. 3-4), and the output is rounded once to bf16.
//
// Backward: the same ring of K/V again (nothing kept from the forward but the
// output and LSE, as Megatron-Core). Each call runs flash attention's backward
// with the chunk's FINAL output and LSE: the merged softmax's gradient splits
// over key sets exactly (FlashAttention-2, Dao 2023, Alg. 2: P = exp(S − L)
// with the global L, delta = rowsum(dO ∘ O)). dQ is summed over the steps in
// fp32; the dK, dV of source s's keys are summed into a travelling fp32
// accumulator that follows the K/V around the ring one step behind: at step i
// rank r adds its share to the accumulator it received from r−1 (the shares of
// the ranks that held s before it) and sends it on; after step cp−1 one more
// hop brings every accumulator home. Then dQ, dK, dV are rounded once to bf16
// (fp32 accumulation as kernels/fp32_rows.h cites). The accumulator's
// exchange after step i overlaps step i+1's attention.
//
// Buffers (one pass's, shared by every layer: BufferReserver::shared), with
// W = kv_heads · attention_head_dim, Wq = heads · attention_head_dim,
// L = seq (this rank's tokens of a sequence, 2c), E = micro_batch · L · W,
// Sq = q_row_stride (Wq, or the fused QKV row's width when Q is a column slice):
//   "cp.ring.kv"           two [K | V] blocks, double buffered        2 · 2E bf16
//   "cp.ring.q_fp32"       the output (forward), dQ (backward)       micro_batch · L · Wq fp32
//   "cp.ring.partial_q"    one call's output (forward), dQ (backward) c · Sq bf16
//   "cp.ring.partial_lse"  one call's LSE (forward)                   heads · c fp32
//   "cp.ring.partial_kv"   one step's dK and dV, per call (backward)  2 · micro_batch · 3c · W bf16
//                          (a sequence's calls see at most c + 2c keys)
//   "cp.ring.grad_kv_fp32" two travelling [dK | dV] accumulators      2 · 2E fp32
//   "workspace.attention"  flash attention's backward workspace, the largest of the
//                          four call shapes (c or 2c keys, causal or not)
//
// Per step on the wire: forward 2E bf16 ([K | V]); backward 2E bf16 and 2E fp32.
//
// The LSE (micro_batch · heads · seq floats, as the block reserves it) is laid
// out per chunk as the all-gather core's: chunk j of sequence b at
// lse + (2b + j) · heads · c, (heads, c).
//
// Streams. The transfers run on the cp group's stream
// (tensor_parallel::Collectives::start, joined by PendingCollective::wait);
// the comments in the .cc give the ordering argument for every reused buffer.
// Every transfer a call starts is joined before it returns, so nothing of one
// layer's call is in flight when the next uses the shared buffers.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/model/context_parallel_chunks.h"
#include "engine/tensor_parallel/collectives.h"
#include "engine/transformer/attention_core.h"
#include "engine/transformer/context_parallel_attention_layout.h"
#include "engine/transformer/model_context.h"
#include "kernels/context_parallel_kv.h"
#include "kernels/flash_attention.h"
#include "kernels/fp32_rows.h"

namespace sextant::engine::transformer {

class ContextParallelRingAttentionCore : public AttentionCore {
 public:
  /// `context`'s shape must have cp > 1 and seq (this rank's tokens of a
  /// sequence) a positive even number; throws std::invalid_argument otherwise.
  /// Its cp group (ModelContext::cp, set by bind) is used from the first forward on.
  explicit ContextParallelRingAttentionCore(ModelContext& context);
  ~ContextParallelRingAttentionCore() override;

  /// The buffers above (kActivations; the workspace kOther, as
  /// "workspace.attention", the one-GPU core's name).
  void reserve(BufferReserver& r) override;
  void forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q, const kernels::Bf16* k,
               const kernels::Bf16* v) override;
  void backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv, const kernels::Bf16* dout,
                const kernels::Bf16* q, const kernels::Bf16* k, const kernels::Bf16* v, const kernels::Bf16* out,
                const float* lse) override;

 private:
  /// One flash attention call of a step: local chunk j's queries against the
  /// first kv_seq keys of the held block's sequence.
  struct Call {
    int chunk = 0;   // local query chunk, 0 or 1
    int kv_seq = 0;  // c (k_s0) or 2c (k_s0 and k_s1)
    bool causal = false;
  };
  /// The calls of step `step` (source (rank − step) mod cp), per sequence: 1 or 2.
  int calls_of_step(int step, Call calls[2]) const;
  /// f(b, call, first row of the call's query chunk) for every sequence b and call of the step.
  template <typename F>
  void for_each_call(int step, F&& f) const;

  /// The cp group; throws std::logic_error when the context has none of the shape's size.
  tensor_parallel::Collectives& group() const;
  /// This rank's place in the cp group.
  int rank() const { return group().rank(); }
  kernels::FlashAttentionShape call_shape(const Call& call) const;
  /// The [K | V] block held at step `step`: kv_'s block step % 2.
  kernels::Bf16* held_block(int step) const;
  /// The dK/dV accumulator added to at step `step` (cp: the one that arrives home).
  float* grad_accumulator(int step) const;
  /// The dK (or, `value`, dV) rows of local chunk j's call for sequence b in partial_kv_.
  kernels::Bf16* partial_grad(bool value, int b, int j) const;
  /// Starts the ring's transfer of one block (block_elements() of `type`):
  /// `send` to rank + 1, `receive` from rank − 1, on the cp group's stream after
  /// the compute stream's work so far; `done` says when both are over.
  void start_exchange(const void* send, void* receive, comm::DataType type, tensor_parallel::PendingCollective& done);
  /// Starts sending held_block(step) to rank + 1 and receiving held_block(step + 1)
  /// from rank − 1 on the cp group's stream; kv_arrival_ says when both are done.
  void start_kv_exchange(int step);
  /// The same for grad_accumulator(step) and grad_accumulator(step + 1); grad_kv_arrival_.
  void start_grad_exchange(int step);
  /// Lazily (they need a CUDA device): the two pending transfers' events.
  void make_pending();
  /// Before either pass's ring: the events, and this rank's K and V packed into held_block(0).
  void start_ring(const kernels::Bf16* k, const kernels::Bf16* v);
  /// Where sequence b's K starts in a [K | V] block (its V: half a block further).
  std::size_t sequence_kv(int b) const;
  /// Every local token's row of width heads · attention_head_dim, contiguous.
  kernels::RowBlock local_q_rows() const;

  ModelContext& context_;
  ContextParallelAttentionLayout layout_;  // heads, strides, the [K | V] block's shape

  kernels::Bf16* kv_ = nullptr;          // 2 blocks of (2, micro_batch, L, W): [K | V]
  float* q_fp32_ = nullptr;              // (micro_batch, L, Wq)
  kernels::Bf16* partial_q_ = nullptr;   // (c, Sq)
  float* partial_lse_ = nullptr;         // (heads, c)
  kernels::Bf16* partial_kv_ = nullptr;  // dK then dV, each (micro_batch, 3c, W): per sequence, the
                                         // q0 call's c keys, then the q1 call's (at most 2c)
  float* grad_kv_ = nullptr;             // 2 accumulators of (2, micro_batch, L, W): [dK | dV]
  char* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;

  std::unique_ptr<tensor_parallel::PendingCollective> kv_arrival_;       // the next [K | V] block
  std::unique_ptr<tensor_parallel::PendingCollective> grad_kv_arrival_;  // the next dK/dV accumulator
};

}  // namespace sextant::engine::transformer
