// Column- and row-parallel linear layers (Shoeybi et al. 2019, Sec. 3 and
// Fig. 3): Y (tokens, out) = X (tokens, in) · Wᵀ with W (out, in) split over the
// ranks of a tensor-parallel communicator.
//
//  column-parallel: rank r holds rows [r·out/tp, (r+1)·out/tp) of W. The
//    forward needs the whole X and gives Y's column block, with no
//    communication; the backward all-reduces dX (the paper's f operator).
//  row-parallel: rank r holds columns [r·in/tp, (r+1)·in/tp) of W. The forward
//    takes X's column block — what a column-parallel layer produced — and
//    all-reduces the partial products into Y (the paper's g operator); the
//    backward gives dX's block with no communication.
// A column-parallel layer followed by a row-parallel one (attention's QKV and
// projection, the MLP's fc1 and fc2) needs one all-reduce each way.
//
// Every product and collective goes on the communicator's stream. Weight
// gradients accumulate in fp32 (beta 1), as the engine's do.
#pragma once

#include "engine/comm/communicator.h"
#include "kernels/bf16.h"
#include "kernels/gemm_cublaslt.h"

namespace sextant::engine::tensor_parallel {

/// Sizes of one rank's part: `tokens` rows of activations, the weight shard
/// (out_local, in_local) as this rank holds it.
struct LinearShard {
  int tokens = 0;
  int in_local = 0;
  int out_local = 0;
};

/// y (tokens, out_local) = x (tokens, in_local) · wᵀ.
void column_parallel_forward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                             const LinearShard& s, const kernels::Bf16* x, const kernels::Bf16* w,
                             kernels::Bf16* y);
/// dx (tokens, in_local) = Σ over ranks of dy · w (all-reduced);
/// dw (out_local, in_local) += dyᵀ · x (fp32).
void column_parallel_backward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                              const LinearShard& s, const kernels::Bf16* dy,
                              const kernels::Bf16* x, const kernels::Bf16* w, kernels::Bf16* dx,
                              float* dw);

/// y (tokens, out_local) = Σ over ranks of x (tokens, in_local) · wᵀ (all-reduced).
void row_parallel_forward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                          const LinearShard& s, const kernels::Bf16* x, const kernels::Bf16* w,
                          kernels::Bf16* y);
/// dx (tokens, in_local) = dy · w; dw (out_local, in_local) += dyᵀ · x (fp32).
void row_parallel_backward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                           const LinearShard& s, const kernels::Bf16* dy, const kernels::Bf16* x,
                           const kernels::Bf16* w, kernels::Bf16* dx, float* dw);

// With sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) the
// activations between the linears are split by tokens — rank r holds rows
// [r·tokens/tp, (r+1)·tokens/tp) — and the all-reduces become an all-gather
// before the column-parallel product and a reduce-scatter after the
// row-parallel one (the same bytes, and norms and dropouts run on 1/tp of the
// tokens). `s.tokens` is still the whole micro-batch's; tokens % tp == 0.

/// x_gathered (tokens, in_local) = all-gather of x_shard (tokens/tp, in_local),
/// kept for the backward; y (tokens, out_local) = x_gathered · wᵀ.
void column_parallel_forward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                                const LinearShard& s, const kernels::Bf16* x_shard,
                                kernels::Bf16* x_gathered, const kernels::Bf16* w,
                                kernels::Bf16* y);
/// dx_shard (tokens/tp, in_local) = reduce-scatter of dy · w (dx_full: (tokens,
/// in_local) scratch); dw (out_local, in_local) += dyᵀ · x_gathered (fp32).
void column_parallel_backward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                                 const LinearShard& s, const kernels::Bf16* dy,
                                 const kernels::Bf16* x_gathered, const kernels::Bf16* w,
                                 kernels::Bf16* dx_full, kernels::Bf16* dx_shard, float* dw);
/// y_shard (tokens/tp, out_local) = reduce-scatter of x · wᵀ (y_full: (tokens,
/// out_local) scratch).
void row_parallel_forward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                             const LinearShard& s, const kernels::Bf16* x, const kernels::Bf16* w,
                             kernels::Bf16* y_full, kernels::Bf16* y_shard);
/// dy_gathered (tokens, out_local) = all-gather of dy_shard; dx (tokens,
/// in_local) = dy_gathered · w; dw += dy_gatheredᵀ · x (fp32).
void row_parallel_backward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                              const LinearShard& s, const kernels::Bf16* dy_shard,
                              kernels::Bf16* dy_gathered, const kernels::Bf16* x,
                              const kernels::Bf16* w, kernels::Bf16* dx, float* dw);

}  // namespace sextant::engine::tensor_parallel
