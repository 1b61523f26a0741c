// Time of one kernel (a linear layer's three GEMMs, flash attention, an
// element-wise kernel): from the profile's measured tables where they cover
// the shape (interpolated in log space, sim/core/log_grid_table.h), from the
// roofline otherwise. Both kernel lists (Megatron's and the engine's) cost
// their kernels here, so a measured profile changes every GEMM alike.
#pragma once

#include "sim/compute/device_rates.h"

namespace sextant::sim {

/// y = x W^T with x (tokens, in_width), `batch` such products in one launch:
/// forward, input gradient (dx = dy W) and weight gradient (dW += dy^T x, fp32).
struct LinearTimes {
  double forward_s = 0;
  double input_gradient_s = 0;
  double weight_gradient_s = 0;
};
LinearTimes linear_times(double tokens, double in_width, double out_width, double batch,
                         const DeviceRates& rates);

/// The epilogue a linear layer's forward fuses into its GEMM, and its input
/// gradient's (our engine's cuBLASLt calls, engine/tensor_parallel/parallel_linear.cc).
enum class ForwardEpilogue { kNone, kBias, kResidual, kBiasResidual, kBiasGelu };
enum class InputGradientEpilogue { kNone, kGeluBackward };
struct LinearEpilogues {
  ForwardEpilogue forward = ForwardEpilogue::kNone;
  InputGradientEpilogue input_gradient = InputGradientEpilogue::kNone;
  /// What the epilogues read or write beyond the plain product (the residual
  /// read as C, GELU's saved input): the fallback's extra bytes at the HBM rate
  /// where the profile has no fused measurement of the shape.
  double forward_extra_bytes = 0;
  double input_gradient_extra_bytes = 0;
};
/// linear_times of a single bf16 product with fused epilogues: the measured
/// fused kernels (profile table linear_bf16_epilogues) where they cover the
/// shape, else the plain products plus the epilogues' extra bytes.
LinearTimes fused_linear_times(double tokens, double in_width, double out_width,
                               const LinearEpilogues& epilogues, const DeviceRates& rates);

/// Causal flash attention of (batch, heads, seq, head_dim) per GPU over
/// `kv_heads` key/value heads (= heads: multi-head; fewer: grouped-query), the
/// work split over `cp` context-parallel ranks.
struct AttentionTimes {
  double forward_s = 0;
  double backward_s = 0;
  /// The times are the profile's table measured at this call's group size
  /// heads / kv_heads > 1: they include what the GQA kernels do beyond
  /// multi-head attention (the backward's sums of dK, dV over each group and,
  /// where it runs, its expansion of K, V to every query head:
  /// kernels/flash_attention.h), which a caller must then not add again.
  bool measured_at_group = false;
};
/// With cp = 1 and a measured profile: its table at the call's group size
/// where the profile measured that group and the table covers the shape, else
/// its multi-head table (every profile's, and what GQA calls used before
/// profiles had GQA rows), else the FLOP roofline.
AttentionTimes attention_times(double batch, double heads, double kv_heads, double seq, double head_dim,
                               double cp, const DeviceRates& rates);

/// One flash attention call of one sequence computing `pairs` (query, key)
/// scores (a non-causal q x k call: q·k; a square causal n x n call: n²/2; a
/// bottom-right causal c x k call: c·k − c²/2), costed as the square causal
/// call of equal pairs, sqrt(2·pairs) tokens (from the measured tables where
/// there are: the kernels walk key blocks per 128-query block, so their time
/// follows the pairs once the query blocks fill the GPU).
AttentionTimes attention_call_times(double pairs, double heads, double kv_heads, double head_dim,
                                    const DeviceRates& rates);

/// Context parallelism's all-gather attention as the engine runs it
/// (engine/transformer/context_parallel_attention_core.h): per sequence two
/// calls, a local chunk's c = seq/(2·cp) queries against the keys up to the
/// chunk's end (bottom-right causal; chunk indices r and 2·cp−1−r,
/// engine/model/context_parallel_chunks.h). Every rank does the same work;
/// rank 0's calls are costed: chunk 0 is a square causal call of c tokens,
/// chunk 2·cp−1 has c·2cp·c − c²/2 (query, key) pairs, costed as the square
/// causal call of equal pairs, c·sqrt(4·cp − 1) tokens (attention_call_times).
AttentionTimes all_gather_attention_times(double batch, double heads, double kv_heads, double seq,
                                          double head_dim, double cp, const DeviceRates& rates);

/// One element-wise kernel sweeping (rows, width); `roofline_bytes` is what it
/// moves, for the roofline where the table has no point.
double elementwise_time_s(ElementwiseKernel kernel, double rows, double width,
                          double roofline_bytes, const DeviceRates& rates);

/// A memory-bound kernel no table measures (the engine's head copies, its MoE
/// routing kernels): `bytes` read and written at the achieved HBM rate, plus
/// the gap a measured kernel leaves on the stream (measured_kernel_gap_s).
double untabled_memory_kernel_s(double bytes, const DeviceRates& rates);

}  // namespace sextant::sim
