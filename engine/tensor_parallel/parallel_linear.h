// The model's linear layers, Y (T, out) = X (T, in) · Wᵀ (+ b) with W (out, in),
// and their tensor-parallel forms (Shoeybi et al. 2019, Sec. 3 and Fig. 3;
// Megatron-Core tensor_parallel/layers.py):
//
//  column-parallel (QKV, fc1): rank r holds rows [r·out/tp, (r+1)·out/tp) of W.
//    The forward needs the whole X and gives Y's column block with no
//    communication; the backward's input gradient is each rank's share of dX,
//    summed over the group (the paper's f operator).
//  row-parallel (proj, fc2): rank r holds columns [r·in/tp, (r+1)·in/tp) of W.
//    The forward takes X's column block — what the column-parallel layer gave —
//    and its partial products are summed over the group into Y (the g
//    operator); the backward gives dX's block with no communication.
//
// The sums are the Plan's collective tasks after the block (tp all-reduce, or
// sequence parallelism's reduce-scatter: sequence_parallel.h), not calls
// inside these layers, so a measured task is the simulator's. The layers here
// run the GEMMs: cuBLASLt with the bias, GELU and the residual add fused in its
// epilogues, and, under sequence parallelism, chunk by chunk as the
// collectives' chunks arrive (tp_comm_overlap) or around the backward's bulk
// overlaps. A layer's parameters are arguments, so one object runs the layer
// of every transformer layer.
//
// Conventions (kernels/): activations and their gradients are bf16 and
// written (=); parameter gradients are fp32, written or accumulated (+=) as
// LinearRuntime::accumulate_gradients says.
#pragma once

#include <cstddef>

#include "engine/tensor_parallel/collectives.h"
#include "engine/tensor_parallel/sequence_parallel.h"
#include "kernels/bf16.h"
#include "kernels/gemm_cublaslt.h"

namespace sextant::engine::tensor_parallel {

/// One layer's parameters on this rank: its shard of W (out_width, in_width),
/// the bias (out_width) or null, and their fp32 gradients (null with them).
struct LinearParameters {
  const kernels::Bf16* weight = nullptr;
  const kernels::Bf16* bias = nullptr;
  float* weight_gradient = nullptr;
  float* bias_gradient = nullptr;
  int in_width = 0;
  int out_width = 0;
};

/// Where a model's linear layers run; the model fills it in when it binds its
/// buffers, and the layers read it at each call.
struct LinearRuntime {
  kernels::CublasLtGemm* gemm = nullptr;
  cudaStream_t stream = nullptr;
  void* bias_workspace = nullptr;  // kernels/bias_gradient.h's column partials
  std::size_t bias_workspace_bytes = 0;
  /// false: the backward writes parameter gradients (a step's first
  /// micro-batch); true: it adds to them (gradient accumulation).
  bool accumulate_gradients = false;
  Collectives* group = nullptr;                 // the tp group; null on one rank
  SequenceParallel* sequence_parallel = nullptr;  // null without sequence parallelism
};

/// db (width, fp32) (+)= the column sums of dy (rows, width), on the
/// runtime's stream and workspace (kernels/bias_gradient.h).
void bias_gradient(const LinearRuntime& runtime, float* db, const kernels::Bf16* dy, int rows, int width);

/// The GEMMs of one rank's linear layer over `rows` tokens, without communication.
class Linear {
 public:
  Linear(const LinearRuntime& runtime, int rows) : runtime_(runtime), rows_(rows) {}

  /// Y = X Wᵀ (+ b in the epilogue) (+ residual, read as C with beta 1, when not null).
  kernels::GemmArgs forward_args(kernels::Bf16* y, const kernels::Bf16* x, const LinearParameters& p,
                                 const kernels::Bf16* residual = nullptr) const;
  /// act = GELU(X Wᵀ (+ b)), X Wᵀ (+ b) kept in `gelu_input` for the backward
  /// (cuBLASLt's (BIAS_)GELU_AUX epilogue: Megatron's bias_gelu fusion).
  kernels::GemmArgs gelu_forward_args(kernels::Bf16* act, kernels::Bf16* gelu_input, const kernels::Bf16* x,
                                      const LinearParameters& p) const;
  void run(const kernels::GemmArgs& g) { runtime_.gemm->run(g, runtime_.stream); }
  void forward(kernels::Bf16* y, const kernels::Bf16* x, const LinearParameters& p,
               const kernels::Bf16* residual = nullptr) {
    run(forward_args(y, x, p, residual));
  }
  /// weight_gradient, then input_gradient (dx may be null: none).
  void backward(kernels::Bf16* dx, const kernels::Bf16* dy, const kernels::Bf16* x, const LinearParameters& p,
                kernels::Bf16* gelu_input = nullptr);
  /// dW (+)= dYᵀ X in fp32, db (+)= the column sums of dY.
  void weight_gradient(const kernels::Bf16* dy, const kernels::Bf16* x, const LinearParameters& p);
  /// dX (T, in) = dY W; with gelu_input, GELU'(gelu_input) applied in the
  /// epilogue: the gradient before the GELU that fed this layer.
  kernels::GemmArgs input_gradient_args(kernels::Bf16* dx, const kernels::Bf16* dy, const LinearParameters& p,
                                        kernels::Bf16* gelu_input) const;
  void input_gradient(kernels::Bf16* dx, const kernels::Bf16* dy, const LinearParameters& p,
                      kernels::Bf16* gelu_input = nullptr) {
    run(input_gradient_args(dx, dy, p, gelu_input));
  }
 protected:
  const LinearRuntime& runtime() const { return runtime_; }
  /// Runs `g` (over rows() rows of a tensor an all-gather fills in chunks) on
  /// each chunk's rows as it arrives — ring order, overlap_schedule.h — or
  /// whole after the last one when row blocks would not be 16-byte aligned.
  void run_on_gathered_chunks(const kernels::GemmArgs& g);

 private:
  const LinearRuntime& runtime_;
  int rows_;
};

class ColumnParallelLinear : public Linear {
 public:
  using Linear::Linear;
  /// The product `g` (forward_args or gelu_forward_args) over the whole input;
  /// under tp_comm_overlap, with the input's all-gather still travelling,
  /// chunk by chunk as its chunks arrive.
  void forward(const kernels::GemmArgs& g);
  /// As Linear::backward; under sequence parallelism with the input's
  /// all-gather in flight (SequenceParallel::start_input_gather): the input
  /// gradient first, its reduce-scatter started, then the weight gradient once
  /// the input arrived — the same products and collective in another order.
  void backward(kernels::Bf16* dx, const kernels::Bf16* dy, const kernels::Bf16* x, const LinearParameters& p);
};

class RowParallelLinear : public Linear {
 public:
  using Linear::Linear;
  /// Without sequence parallelism: Y = X Wᵀ, the bias and the residual
  /// added by the rank that adds the group's replicated terms (rank 0, or
  /// the only one), so the all-reduce after the block counts them once.
  void forward(kernels::Bf16* y, const kernels::Bf16* x, const LinearParameters& p, const kernels::Bf16* residual);
  /// Under sequence parallelism: this rank's partial sums of Y (no bias, no
  /// residual: the reduce-scatter task adds them on the rank's tokens); under
  /// tp_comm_overlap chunk by chunk, each chunk sent to its owner as soon as
  /// it is computed.
  void forward_partial_sums(kernels::Bf16* partials, const kernels::Bf16* x, const LinearParameters& p);
  /// As Linear::backward; under tp_comm_overlap with dy's all-gather
  /// travelling, the input gradient chunk by chunk as dy's chunks arrive, then
  /// the weight gradient (Transformer Engine's split pipelined all-gather).
  void backward(kernels::Bf16* dx, const kernels::Bf16* dy, const kernels::Bf16* x, const LinearParameters& p,
                kernels::Bf16* gelu_input = nullptr);
};

}  // namespace sextant::engine::tensor_parallel
