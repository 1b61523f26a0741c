// The measured cost profile `sextant calibrate` writes: every measured point of
// the engine's kernels on one GPU, the scalar CostProfile fields derived from
// them, and how they were measured. Plain data, no CUDA: the writer
// (profile_writer.h) and the derivation (derived_scalars.h) run anywhere.
//
// The YAML contract is PROFILE_SCHEMA (the reader is sim/); the field order
// here is the order the writer emits.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sextant::engine::calibration {

/// One linear layer y = x W^T of x (tokens, in_width), W (out_width, in_width):
/// its three products (kernels/gemm_cublaslt.h), each the median seconds.
struct LinearPoint {
  long long tokens = 0;
  long long in_width = 0;
  long long out_width = 0;
  double forward_s = 0;          // Y = X W^T, bf16 out
  double input_gradient_s = 0;   // dX = dY W
  double weight_gradient_s = 0;  // dW += dY^T X, fp32 C, beta 1
  // The same products with the epilogues the engine fuses (engine/tensor_parallel/parallel_linear.cc),
  // which make cuBLASLt pick other kernels than the plain product's:
  double forward_bias_s = 0;           // Y = X W^T + b (QKV, and fc1 without GELU)
  double forward_residual_s = 0;       // Y = X W^T + R, R read as C (proj, fc2 without bias)
  double forward_bias_residual_s = 0;  // Y = X W^T + b + R (proj, fc2 of GPT)
  double forward_bias_gelu_s = 0;      // Y = GELU(X W^T + b), its input saved as aux (fc1 of GPT)
  double input_gradient_dgelu_s = 0;   // dX = GELU'(aux) * (dY W) (fc2's input gradient of GPT)
};

/// Causal flash attention (kernels/flash_attention.h), bf16: `heads` query heads
/// over `kv_heads` key/value heads (equal: multi-head attention; fewer: GQA).
struct AttentionPoint {
  int batch = 0;
  int heads = 0;
  int kv_heads = 0;
  int seq = 0;
  int head_dim = 0;
  double forward_s = 0;
  double backward_s = 0;
};

/// One memory-bound kernel at (rows, width) of the tensor it sweeps.
struct ElementwisePoint {
  long long rows = 0;
  long long width = 0;
  double seconds = 0;
};

/// A kernel's points, named as PROFILE_SCHEMA's fixed set (layernorm_forward, ...).
struct ElementwiseTable {
  std::string kernel;
  std::vector<ElementwisePoint> points;
};

struct Overheads {
  double kernel_launch_s = 0;  // one kernel launch, stream-ordered, outside a graph
  double graph_kernel_s = 0;   // per kernel inside a replayed CUDA graph
  double graph_launch_s = 0;   // one cudaGraphLaunch
  double host_step_s = 0;      // per optimizer step on the host (upload, read back, sync)
};

/// One collective over `ranks` GPUs; bytes = the buffer each rank passes.
struct CollectivePoint {
  int ranks = 0;
  long long bytes = 0;
  double seconds = 0;
};

struct NcclTables {
  std::vector<CollectivePoint> all_reduce;
  std::vector<CollectivePoint> reduce_scatter;
  std::vector<CollectivePoint> all_gather;
  std::vector<CollectivePoint> all_to_all;
  std::vector<CollectivePoint> send_recv;
};

/// A scalar CostProfile field and how it was obtained (the YAML's trailing comment).
struct DerivedScalar {
  double value = 0;
  std::string how;
};

/// The scalar fields of sim::CostProfile, all of them (PROFILE_SCHEMA), in its order.
struct ProfileScalars {
  DerivedScalar gemm_efficiency;
  DerivedScalar fp8_gemm_efficiency;
  DerivedScalar gemm_tile_m;
  DerivedScalar gemm_tile_n;
  DerivedScalar gemm_k_half;
  DerivedScalar flash_attention_forward_efficiency;
  DerivedScalar flash_attention_backward_efficiency;
  DerivedScalar flash_attention_half_efficiency_tiles;
  DerivedScalar sustained_compute_fraction;
  DerivedScalar memory_efficiency;
  DerivedScalar kernel_overhead_s;
  DerivedScalar nvlink_efficiency;
  DerivedScalar collective_launch_s;
  DerivedScalar network_efficiency;
};

/// Provenance: the keys of PROFILE_SCHEMA's `measurement:` block, in order.
struct Provenance {
  std::string gpu_name;
  std::string driver_version;
  std::string cuda_runtime_version;
  std::string cublas_version;
  std::string nccl_version;  // "" when NCCL was not used
  std::string gpu_count;
  std::string commit;
  std::string date;
  std::string command;
  std::string method;
  std::string duration_s;
};

struct MeasuredProfile {
  std::string name;      // e.g. h100-sxm-80gb-measured
  std::string gpu;       // the GPU preset (configs/gpus) it describes
  std::string software = "sextant-engine";
  std::string source;    // one line
  ProfileScalars scalars;
  Provenance measurement;
  std::vector<LinearPoint> linear_bf16;
  std::vector<LinearPoint> linear_fp8;
  std::vector<AttentionPoint> attention;
  std::vector<ElementwiseTable> elementwise;
  Overheads overheads;
  NcclTables nccl;
};

}  // namespace sextant::engine::calibration
