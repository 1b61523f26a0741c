// Flash attention forward, causal or not (Dao et al. 2022, "FlashAttention"; the loop
// order of Dao 2023, "FlashAttention-2": each thread block owns a block of query
// rows and walks the key blocks up to the diagonal, or all of them, with an online softmax), so
// the (seq, seq) score matrix is never stored. Grouped-query attention (Ainslie
// et al. 2023): query head h reads key/value head h / (heads / kv_heads).
//
// bf16 inputs and output, fp32 accumulation on the tensor cores, softmax scale
// 1/sqrt(head_dim). The log-sum-exp of each query row's scaled scores is saved
// in fp32 so the backward pass recomputes the probabilities without the
// (seq, seq) matrix (FlashAttention-2, Algorithm 2).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// The shape of one attention call. Q and O are (batch, seq, heads, head_dim);
/// K and V are (batch, kv_seq, kv_heads, head_dim); row-major. O (and dO, LSE) are
/// contiguous; the tokens of Q, K and V (and of dQ, dK, dV) may be further
/// apart than one row, so that they can be column slices of one fused buffer,
/// e.g. the (tokens, (heads + 2 * kv_heads) * head_dim) output of one QKV GEMM:
/// element i of head h of token t of sequence b is
///   q[(b * seq + t) * q_row_stride + h * head_dim + i], k and v likewise with kv_seq and
///   kv_row_stride.
struct FlashAttentionShape {
  int batch = 0;
  int seq = 0;       // query tokens per sequence
  // Key/value tokens per sequence; 0 means seq. Causal: at least seq, and the
  // queries are the LAST seq of kv_seq positions (bottom-right causal alignment,
  // as FlashAttention-2 v2.1 defines it): query i attends keys j <= i + kv_seq - seq.
  // Non-causal: any positive number (below seq too); every query attends all.
  // Context parallelism's all-gather attention (Llama 3, Dubey et al. 2024,
  // Sec. 3.3.2) runs a rank's query chunk against the keys up to its end.
  // K, V (and dK, dV) are (batch, kv_seq, kv_heads, head_dim); Q, O, dQ, dO
  // (batch, seq, heads, head_dim) and LSE (batch, heads, seq).
  int kv_seq = 0;
  int heads = 0;     // query heads
  int kv_heads = 0;  // key/value heads; must divide heads (GQA, kv_heads == heads is MHA)
  int head_dim = 0;  // 64 or 128
  // Elements between consecutive tokens of q (and dq); 0 means heads * head_dim.
  int q_row_stride = 0;
  // Elements between consecutive tokens of k and v (and dk, dv); 0 means kv_heads * head_dim.
  int kv_row_stride = 0;
  // false: no mask, every query attends every key, and kv_seq may be any
  // positive number (below seq too). Ring attention's steps (Liu et al. 2023;
  // under the causally load-balanced split, Megatron-Core's context
  // parallelism) attend a K/V chunk that lies wholly before the queries.
  // Every path (generic and Hopper, forward and backward) runs it, in kernels
  // of their own (a template flag), so causal calls run the causal kernels
  // unchanged.
  bool causal = true;
};

/// Empty when flash_attention_forward and _backward can run `shape`; otherwise every reason
/// it cannot, with the values ("head_dim (96) must be 64 or 128; ..."). A nonzero row
/// stride must be a multiple of 8 (16-byte rows) and at least the contiguous width.
std::string flash_attention_unsupported_reason(const FlashAttentionShape& shape);

/// out: (batch, seq, heads, head_dim) bf16, written.
/// lse: (batch, heads, seq) fp32, written: log(sum_j exp(q_i . k_j / sqrt(head_dim)))
///   over the keys j <= i + kv_seq - seq (non-causal: every key j < kv_seq), natural logarithm.
/// q: (batch, seq, heads, head_dim); k, v: (batch, kv_seq, kv_heads, head_dim) bf16, with
///   the shape's row strides.
/// Throws KernelArgumentError (before launching anything) when the shape is
/// unsupported, a pointer is null, or q, k, v, out are not 16-byte aligned.
void flash_attention_forward(Bf16* out, float* lse, const Bf16* q, const Bf16* k, const Bf16* v,
                             const FlashAttentionShape& shape, cudaStream_t stream);

/// Device workspace flash_attention_backward needs: an fp32 dQ accumulator
/// (batch, seq, heads, head_dim) and the fp32 row sums delta_i = dO_i . O_i
/// (batch, heads, seq); on compute capability 9.0 the wgmma backward's instead
/// (dQ padded to whole query blocks, 64 queries at head_dim 128 and 128 at 64,
/// delta and LSE in log2 units), and the size returned covers either. With
/// GQA at head_dim 64 (or a shape the Hopper backward refuses), on any device,
/// also K, V, dK and dV expanded to every query head (bf16, kv_seq tokens
/// each): on a device other than 9.0, when the generic kernel's (kv head,
/// sequence, key block) blocks would not fill the GPU, it runs as multi-head
/// attention on those and sums each group's dK, dV (one more bf16 rounding).
/// 0 for a shape flash_attention_unsupported_reason rejects.
std::size_t flash_attention_backward_workspace_bytes(const FlashAttentionShape& shape);

/// Whether flash_attention_backward on the current device runs `shape` (GQA)
/// with K and V expanded to every query head (see
/// flash_attention_backward_workspace_bytes): dK and dV are then each query
/// head's share rounded to bf16, summed in fp32 and rounded again.
bool flash_attention_backward_expands_kv_heads(const FlashAttentionShape& shape);

/// Whether flash_attention_backward on the current device runs `shape` on the
/// Hopper wgmma kernels (compute capability 9.0, head_dim 64 or 128, within
/// their grid and TMA limits) rather than the generic mma.sync kernel.
bool flash_attention_backward_runs_sm90(const FlashAttentionShape& shape);

/// The gradients of flash_attention_forward, all written (not accumulated):
/// dq: (batch, seq, heads, head_dim) bf16, with q's row stride;
/// dk, dv: (batch, kv_seq, kv_heads, head_dim) bf16, with k's row stride, each summed
///   over the query heads that share the key/value head. Only the head columns of
///   each row are written, so dq, dk, dv may be slices of one fused gradient buffer.
/// dout, out: (batch, seq, heads, head_dim) bf16, the output's gradient and the
///   forward's output; lse: (batch, heads, seq) fp32, the forward's.
/// q, k, v as for the forward. The probabilities are recomputed from lse.
/// dq, dk, dv must not overlap q, k, v, dout, out or each other's head columns.
/// dQ is summed over key blocks with fp32 atomics, so its last bits may differ
/// from run to run; dK and dV are deterministic.
/// Throws KernelArgumentError (before launching anything) when the shape is
/// unsupported, a pointer is null, a bf16 pointer or the workspace is not
/// 16-byte aligned, or the workspace is smaller than
/// flash_attention_backward_workspace_bytes(shape).
void flash_attention_backward(Bf16* dq, Bf16* dk, Bf16* dv, const Bf16* dout, const Bf16* q,
                              const Bf16* k, const Bf16* v, const Bf16* out, const float* lse,
                              const FlashAttentionShape& shape, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace sextant::kernels
