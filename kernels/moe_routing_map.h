// Where each token's copies go: from the router's top-k choices to the row of
// the expert-sorted ("permuted") activations each (token, choice) pair occupies,
// as Megatron-Core's permute orders them (moe_utils.permute): grouped by expert
// in expert order, and within an expert by token order (a stable sort by expert).
// kernels/moe_permute.h then moves the rows; the grouped GEMM
// (kernels/moe_grouped_gemm.h) runs each expert on its block of rows.
//
// Dropless by default: every pair gets a row, tokens x topk rows in all, and an
// expert gets as many rows as tokens chose it (possibly none).
// With a capacity (Switch, Fedus et al. 2021, Sec. 2.2: capacity = tokens x topk /
// experts x capacity factor, moe_expert_capacity below), an expert keeps at most
// `capacity` of the pairs that chose it; the others are dropped (row -1: the token
// skips that expert, its weight contributes nothing, and the residual carries it).
// Which are kept is Megatron's --moe-token-drop-policy:
// - kProbs: the `capacity` with the largest router weights (ties: earlier token),
// - kPosition: the first `capacity` by token order (the last tokens of the batch drop).
// Kept pairs stay in token order within the expert either way. With
// pad_to_capacity every expert gets exactly `capacity` rows (Megatron's
// --moe-pad-expert-input-to-capacity), the unused ones at the end of its block
// zero-filled by the permutation (Megatron fills them with other tokens at weight
// 0; the results are the same, as those rows never reach the output).
// Without it, rows_multiple rounds every expert's block up to a multiple of that
// many rows, zero-filled the same way: cuBLAS's grouped weight gradient (the rows
// its inner dimension) stays one kernel only when every expert's rows are a
// multiple of 8, and otherwise launches one GEMM per expert at ~10 us of host
// time each, 1.2-1.6 ms for 128 experts against 0.04-0.06 ms
// (reports/measurements/2026-11-27-h100-moe-ncu/).
//
// Deterministic: a counting sort by expert that keeps slot order within an
// expert (kernels/moe_routing_map.cu), CUB's stable radix sort for the kProbs
// priorities, and integer counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/stream.h"

namespace sextant::kernels {

enum class MoeDropPolicy { kProbs, kPosition };

struct MoeRoutingOptions {
  int capacity = 0;  // rows per expert at most; 0: dropless
  MoeDropPolicy drop_policy = MoeDropPolicy::kProbs;
  bool pad_to_capacity = false;  // needs capacity > 0
  int rows_multiple = 1;          // >= 1; without pad_to_capacity, each block rounded up to a multiple
};

/// Megatron-Core's get_capacity for tokens x topk choices: ceil(tokens x topk /
/// experts x capacity_factor), at least min_capacity. Throws KernelArgumentError
/// unless capacity_factor > 0 and the capacity fits in int32.
int moe_expert_capacity(int tokens, int topk, int experts, double capacity_factor, int min_capacity = 0);

/// Rows of the permuted activations the routing map can use: tokens x topk
/// (dropless or dropping) plus experts x (rows_multiple - 1), or experts x capacity
/// (padded to capacity), whichever the options give.
std::int64_t moe_permuted_rows_bound(int tokens, int topk, int experts, const MoeRoutingOptions& options);

/// Device workspace moe_routing_map needs.
std::size_t moe_routing_map_workspace_bytes(int tokens, int topk, int experts);

/// topk_ids: (tokens, topk) int32 in [0, experts), distinct per token (as the router
///   writes them). topk_weights: (tokens, topk) fp32 >= 0, read only by the kProbs
///   policy with a capacity (may be null otherwise).
/// token_rows: (tokens, topk) int32, written: the permuted row of each pair, or -1
///   where it was dropped.
/// kept_tokens_per_expert: (experts) int32, written: the pairs each expert kept.
/// expert_rows: (experts) int32, written: the rows of each expert's block, = kept
///   tokens rounded up to rows_multiple, or capacity when padded to it; the blocks lie in expert order from row 0, so
///   expert e starts at the sum of expert_rows before it. The grouped GEMM takes
///   these on the host: copy them back (a device-to-host sync, as Megatron's
///   tokens_per_expert.cpu() is).
/// workspace: moe_routing_map_workspace_bytes, 256-byte aligned.
void moe_routing_map(std::int32_t* token_rows, std::int32_t* kept_tokens_per_expert,
                     std::int32_t* expert_rows, const std::int32_t* topk_ids,
                     const float* topk_weights, int tokens, int topk, int experts,
                     const MoeRoutingOptions& options, void* workspace, std::size_t workspace_bytes,
                     cudaStream_t stream);

}  // namespace sextant::kernels
