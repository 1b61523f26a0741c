// Efficiencies that turn hardware peaks into achieved rates, per GPU type, and,
// for a measured profile, the kernel times themselves.
//
// Default profiles are configs/profiles/<gpu>.yaml; `--profile FILE` replaces
// them. Every field says in its YAML where it was measured or what it was
// fitted on (STYLE.md: "a tuned efficiency says what it was fitted on").
// The YAML contract of a measured profile (`sextant calibrate`'s output) is
// /work/wt/PROFILE_SCHEMA.md, copied into docs of configs/profiles/measured/.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/framework_behaviour.h"
#include "sim/core/log_grid_table.h"

namespace sextant::sim {

/// Whose kernels a profile describes; picks the per-layer kernel list
/// (sim/compute/megatron_layer_kernels.cc or engine_layer_kernels.cc).
enum class Software : std::uint8_t {
  kMegatronPublished,  // Megatron-LM as its published runs ran it (one efficiency fitted on them)
  kSextantEngine,      // our engine (engine/), as `sextant calibrate` measured it
};
std::string_view to_string(Software software);
std::optional<Software> parse_software(std::string_view text);

/// Element-wise / memory-bound kernels a measured profile times by (rows, width).
enum class ElementwiseKernel : std::uint8_t {
  kLayernormForward, kLayernormBackward, kRmsnormForward, kRmsnormBackward,
  kGeluForward, kSwigluForward, kSwigluBackward, kRopeForward, kRopeBackward,
  kEmbeddingForward, kEmbeddingBackward, kCrossEntropy, kBiasGradient, kResidualAdd,
  kAdamw, kGradNorm,
};
inline constexpr int kElementwiseKernels = 16;
/// The YAML key of each kernel ("layernorm_forward", ...), in enum order.
std::string_view to_string(ElementwiseKernel kernel);

/// One measured linear layer y = x W^T, x: (tokens, in_width).
struct LinearPoint {
  double tokens = 0, in_width = 0, out_width = 0;
  double forward_s = 0, input_gradient_s = 0, weight_gradient_s = 0;
};
/// One measured linear layer's products with the engine's fused cuBLASLt
/// epilogues (engine/tensor_parallel/parallel_linear.cc), which run other kernels than the plain ones.
struct LinearEpiloguePoint {
  double tokens = 0, in_width = 0, out_width = 0;
  double forward_bias_s = 0;           // Y = X W^T + b
  double forward_residual_s = 0;       // Y = X W^T + R (R read as C)
  double forward_bias_residual_s = 0;  // Y = X W^T + b + R
  double forward_bias_gelu_s = 0;      // Y = GELU(X W^T + b), the GELU input saved
  double input_gradient_dgelu_s = 0;   // dX = GELU'(saved) * (dY W)
};
/// One measured causal flash attention (bf16): `heads` query heads over
/// `kv_heads` key/value heads, which divide them (equal: multi-head attention,
/// a row of `attention:`; fewer: grouped-query, a row of `attention_gqa:`).
struct AttentionPoint {
  double batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  double forward_s = 0, backward_s = 0;
};
/// Query heads per key/value head (1: multi-head attention) when kv_heads
/// divides heads, else 0 (no table is kept for such a ratio).
int attention_group_size(double heads, double kv_heads);
/// One measured element-wise kernel over a (rows, width) tensor.
struct ElementwisePoint {
  double rows = 0, width = 0, seconds = 0;
};
/// One measured collective: `bytes` is the buffer each of `ranks` ranks passes.
struct CollectivePoint {
  double ranks = 0, bytes = 0, seconds = 0;
};

struct MeasuredOverheads {
  double kernel_launch_s = 0;  // one stream-ordered launch outside a graph
  double graph_kernel_s = 0;   // per kernel inside a replayed CUDA graph
  double graph_launch_s = 0;   // one cudaGraphLaunch
  double host_step_s = 0;      // per optimizer step on the host
};

/// The measured tables of a profile (`sextant calibrate`); absent in datasheet profiles.
struct MeasuredTables {
  std::vector<LinearPoint> linear_bf16;
  std::vector<LinearPoint> linear_fp8;
  std::vector<LinearEpiloguePoint> linear_bf16_epilogues;
  std::vector<AttentionPoint> attention;
  std::array<std::vector<ElementwisePoint>, kElementwiseKernels> elementwise;
  std::optional<MeasuredOverheads> overheads;
  std::vector<CollectivePoint> all_reduce, reduce_scatter, all_gather, all_to_all, send_recv;
  /// Provenance (the `measurement:` block), key and value as written.
  std::vector<std::pair<std::string, std::string>> measurement;

  /// The tables above as log-space interpolation grids (log_grid_table.h),
  /// made by build_lookup() once the points are in.
  struct Lookup {
    LogGridTable linear_bf16{3, 3};  // (tokens, in, out) -> forward, input grad, weight grad
    LogGridTable linear_fp8{3, 3};
    LogGridTable linear_bf16_epilogues{3, 5};  // (tokens, in, out) -> the five LinearEpiloguePoint times
    /// (batch, heads, seq, head_dim) -> forward, backward: one table per group
    /// size (heads / kv_heads) measured, 1 the multi-head one. One table each
    /// because LogGridTable interpolates in at most 4 sizes, and because a group
    /// is a different kernel path, not a size to interpolate over
    /// (kernels/flash_attention.h: the GQA backward sums dK, dV over the group).
    std::map<int, LogGridTable> attention;
    std::array<LogGridTable, kElementwiseKernels> elementwise;  // (rows, width) -> seconds
  } lookup;
  void build_lookup();
};

/// Names of the fit's free parameters (sim/compute/device_rates.cc reads the
/// first three; the power cap is a run condition, sim/compute/stage_rates.h).
inline constexpr std::string_view kFitComputeTimeFactor = "compute_time_factor";
inline constexpr std::string_view kFitStepOverhead = "step_overhead_s";
inline constexpr std::string_view kFitMicrobatchOverhead = "microbatch_overhead_s";
/// The HFU (at the calibrated burst clock) at which the GPU reaches its power
/// cap: above it the sustained clock falls as HFU^(-1/3) (sim/compute/power_cap.h).
inline constexpr std::string_view kFitPowerCapHfu = "power_cap_hfu";

/// The `fit:` block: free parameters fitted on measured engine runs
/// (`sextant fit-profile`), and how well they fit.
struct ProfileFit {
  std::string data_set;
  std::vector<std::pair<std::string, double>> parameters;
  double log_residual_sd = 0;  // sd of ln(measured / predicted) over the fitted runs
  int runs = 0;
  /// The named parameter, or `fallback` when the fit does not have it.
  double parameter(std::string_view name, double fallback) const {
    for (const auto& [key, value] : parameters)
      if (key == name) return value;
    return fallback;
  }
};

struct CostProfile {
  std::string name;
  std::string gpu;  // the GPU preset this profile describes
  Software software = Software::kMegatronPublished;
  /// Fraction of the dense bf16 peak the largest GEMMs reach, before the
  /// wave-quantisation and memory-bound corrections of gemm_time.
  double gemm_efficiency = 0;
  /// Same for FP8 GEMMs, against the FP8 peak (Micikevicius et al. 2022).
  double fp8_gemm_efficiency = 0;
  /// Output tile of the GEMM kernels, for wave quantisation (tiles per SM wave).
  int gemm_tile_m = 0;
  int gemm_tile_n = 0;
  /// Inner dimension at which a GEMM reaches half its large-k efficiency: the
  /// efficiency is scaled by k/(k + gemm_k_half) (short k: prologue/epilogue dominate).
  double gemm_k_half = 0;
  /// Fraction of the bf16 peak causal flash attention reaches, forward and backward.
  double flash_attention_forward_efficiency = 0;
  double flash_attention_backward_efficiency = 0;
  /// Query tiles (batch·heads·s/128) at which flash attention reaches half its
  /// efficiency: scaled by u/(u + this), too few tiles leave SMs idle.
  double flash_attention_half_efficiency_tiles = 0;
  /// Compute rate sustained over whole training steps on many GPUs, as a
  /// fraction of the single-kernel rates above: clocks lowered by the power cap
  /// under sustained load, SMs shared with overlapped communication kernels,
  /// gaps between kernels. Scales GEMM and attention rates; fitted end to end.
  double sustained_compute_fraction = 1;
  /// Fraction of the HBM bandwidth memory-bound kernels reach.
  double memory_efficiency = 0;
  /// Fixed cost of one kernel launch on the critical path.
  double kernel_overhead_s = 0;
  /// Fraction of the per-direction link bandwidth a large NCCL collective reaches.
  double nvlink_efficiency = 0;
  /// Fixed cost of one collective or send as Megatron issues it (torch.distributed
  /// call, NCCL kernel launch and handshake), paid once per call.
  double collective_launch_s = 0;
  double network_efficiency = 0;
  std::string source;
  /// Measured kernel times (null for a datasheet profile). Shared: profiles are
  /// copied by value into every search worker, the tables are not.
  std::shared_ptr<const MeasuredTables> tables;
  std::optional<ProfileFit> fit;
  /// What the framework's software runs differently (framework_behaviour.h);
  /// Megatron-Core's by default.
  FrameworkBehaviour behaviour;
  /// What it can run (the search reads selective_recompute; the rest is
  /// applied to the layout by restrict_to_framework).
  FrameworkSupport supports;
  /// The framework (sim/core/framework.h) whose sustained fraction replaced the
  /// profile's own; empty when the profile's own is used.
  std::string framework;
};

}  // namespace sextant::sim
