// What `sextant calibrate` measures: the linear layers, attention calls and
// memory-bound kernel sizes of the model presets' transformer layers, plus
// log-spaced grids around them so the simulator can interpolate in log space
// where no preset lands. Plain C++: which shapes to measure is a pure function
// of the models and the options, tested on the CPU.
#pragma once

#include <string>
#include <vector>

#include "sim/core/model_config.h"

namespace sextant::engine::calibration {

/// GEMMs timed per linear shape (linear.h): the three plain products and five
/// with the engine's fused epilogues.
inline constexpr int kLinearProducts = 8;

struct LinearShape {
  long long tokens = 0, in_width = 0, out_width = 0;
  auto operator<=>(const LinearShape&) const = default;
};

/// One causal attention call: `heads` query heads sharing `kv_heads` key/value
/// heads (kv_heads = heads: multi-head; fewer: grouped-query, Ainslie et al. 2023).
struct AttentionShape {
  int batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  auto operator<=>(const AttentionShape&) const = default;
};

struct ElementwiseShape {
  long long rows = 0, width = 0;
  auto operator<=>(const ElementwiseShape&) const = default;
};

/// The kernels of PROFILE_SCHEMA's `elementwise:` block, in its order.
const std::vector<std::string>& elementwise_kernel_names();

struct ShapeOptions {
  bool quick = false;  // a ~1 minute subset: fewer micro-batches, a coarser grid
};

/// The tensor-parallel sizes whose layer shapes are measured: 1, 2, 4, 8.
inline constexpr int kTensorParallelSizes[] = {1, 2, 4, 8};

/// Linear layers of each model's transformer layer (QKV, attention projection,
/// fc1, fc2) and its LM head, per tp in {1,2,4,8} (output or input width split by
/// tp, as Megatron's column/row-parallel layers split them, where it divides into
/// whole multiples of 8) and micro-batch 1..8 (tokens = mbs·seq; quick: 1, 2, 4, 8),
/// leaving out an activation over 2^31 elements (more than the engine can hold),
/// plus the grid tokens × in × out over {512, 2048, 8192, 32768, 65536} (quick:
/// {512, 4096, 32768}) whose operands each hold at most 2^28 elements; for an MoE
/// model also its experts' fc1 and fc2 at rows per expert 16..16384 (each power of
/// two and 1.5x it; quick: powers of four) and at each micro-batch's mean rows per
/// expert (mbs·seq·topk / experts, rounded up to 8). Sorted, unique.
std::vector<LinearShape> linear_shapes(const std::vector<sim::ModelConfig>& models, const ShapeOptions& options);

/// Causal attention as the engine runs it: each model's heads / tp and key/value
/// heads / tp (num_query_groups / tp, as the engine splits them), its head
/// dimension as the kernel takes it (64, else 128: padded), its sequence, batch =
/// micro-batch (1, 2, 4, 8); plus the grid seq 512..32768 (×2) × head_dim {64, 128}
/// × heads {16, 32, 64} × group {1, 4, 8} at batch max(1, 16384/seq) and at batch 1
/// (the calls of context parallelism); quick: seq ×4 (512, 2048, 8192, 32768), heads
/// {16, 32}, the first batch only. Sorted, unique.
std::vector<AttentionShape> attention_shapes(const std::vector<sim::ModelConfig>& models,
                                             const ShapeOptions& options);

/// (rows, width) points of one memory-bound kernel: a log grid of rows × width
/// (adamw and grad_norm: rows 1, width = parameters 2^20..2^28), capped so one
/// tensor holds at most 2^28 elements; cross_entropy's widths are vocabularies
/// (the grid's and each model's). Sorted, unique.
std::vector<ElementwiseShape> elementwise_shapes(const std::string& kernel,
                                                 const std::vector<sim::ModelConfig>& models,
                                                 const ShapeOptions& options);

}  // namespace sextant::engine::calibration
