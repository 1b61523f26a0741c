// Moving token rows to and from the experts, by the routing map
// (kernels/moe_routing_map.h: token_rows[t, j] is the permuted row of token t's
// j-th choice, or -1 where it was dropped).
//
//   permute    forward   permuted[token_rows[t, j]] = x[t]            (a copy per choice)
//              backward  dx[t] = sum_j dpermuted[token_rows[t, j]]
//   unpermute  forward   out[t] = sum_j w[t, j] * expert_out[token_rows[t, j]]
//              backward  dexpert_out[token_rows[t, j]] = w[t, j] * dout[t]
//                        dw[t, j] = <dout[t], expert_out[token_rows[t, j]]>
// (dropped pairs: nothing moved, dw = 0.) Megatron-Core's permute/unpermute with
// the probabilities applied at the un-permutation, as its default does.
//
// One block per token, so every sum over a token's choices runs in choice order
// in fp32 and is rounded to bf16 once: deterministic, no atomics. The token's row
// is read once and written topk times (permute), or its topk rows read once
// (the others). Rows of `cols` bf16, 16-byte vectors: cols % 8 == 0 and every
// bf16 pointer 16-byte aligned.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// Rows of the permuted activations that no token fills when the experts' blocks
/// are padded (kernels/moe_routing_map.h): expert e's block holds capacity rows
/// (padded to a capacity) or kept[e] rounded up to rows_multiple, from the sum of
/// the blocks before it; its rows after the kept ones are padding. The
/// permutation writes them with zeros, so the expert GEMMs read no garbage.
struct MoePadding {
  const std::int32_t* kept_tokens_per_expert = nullptr;  // (experts), from moe_routing_map; null: no padding
  int experts = 0;
  int capacity = 0;       // > 0: every block this many rows
  int rows_multiple = 1;  // without a capacity: each block rounded up to a multiple
};

/// permuted: (rows, cols) bf16, each mapped row written (and padding rows zeroed);
/// x: (tokens, cols) bf16; token_rows: (tokens, topk) int32.
void moe_permute_forward(Bf16* permuted, const Bf16* x, const std::int32_t* token_rows, int tokens,
                         int topk, int cols, const MoePadding& padding, cudaStream_t stream);

/// dx: (tokens, cols) bf16, written (0 for a token whose choices were all dropped);
/// dpermuted: (rows, cols) bf16.
void moe_permute_backward(Bf16* dx, const Bf16* dpermuted, const std::int32_t* token_rows, int tokens,
                          int topk, int cols, cudaStream_t stream);

/// out: (tokens, cols) bf16, written; expert_out: (rows, cols) bf16;
/// topk_weights: (tokens, topk) fp32 (the router's weights).
/// residual: (tokens, cols) bf16 or null: added to the sum before its one
/// rounding (the MoE block's residual add, as the dense MLP's fc2 adds it in its
/// GEMM's epilogue); it may alias out.
void moe_unpermute_forward(Bf16* out, const Bf16* expert_out, const float* topk_weights,
                           const std::int32_t* token_rows, int tokens, int topk, int cols,
                           cudaStream_t stream, const Bf16* residual = nullptr);

/// dexpert_out: (rows, cols) bf16, each mapped row written (and padding rows zeroed);
/// dtopk_weights: (tokens, topk) fp32, written; dout: (tokens, cols) bf16;
/// expert_out and topk_weights as the forward took them.
void moe_unpermute_backward(Bf16* dexpert_out, float* dtopk_weights, const Bf16* dout,
                            const Bf16* expert_out, const float* topk_weights,
                            const std::int32_t* token_rows, int tokens, int topk, int cols,
                            const MoePadding& padding, cudaStream_t stream);

}  // namespace sextant::kernels
