// One of a transformer layer's two residual blocks — Megatron-Core's pre-norm
// sublayer of TransformerLayer: out = in + f(norm(in)), with f the
// self-attention (attention.h) or the MLP (mlp.h); an MoE layer or another
// attention is another subclass, beside them.
//
// This base holds what every such block shares: its norm and the norm's
// stored activations, where it reads and writes the residual stream, and the
// Plan's tensor-parallel tasks around its compute task (Shoeybi et al. 2019,
// Sec. 3; Korthikanti et al. 2022, Sec. 4.2.2):
//  - without sequence parallelism, the all-reduce task after the block
//    (kTensorParallel): of the row-parallel output in the forward (the rank
//    that adds the replicated terms added the bias and the residual), of the
//    column-parallel input gradient in the backward, then the norm's backward;
//  - with it, the all-gather task before the block (kTensorParallelGather):
//    the norm on this rank's tokens and the all-gather of its output in the
//    forward; in the backward the all-gather of the residual stream's gradient
//    and again of the norm's output (and, when the norms do not sum it, the
//    output bias's gradient from this rank's tokens); and the reduce-scatter
//    task after it (kTensorParallelScatter): the row-parallel partial sums
//    onto this rank's tokens plus the residual and the bias in the forward,
//    the column-parallel input gradient's then the norm's backward in the
//    backward (tensor_parallel/sequence_parallel.h).
// A subclass runs the block's compute task between them: forward() from
// normed_input() to the row-parallel product (project_to_output), backward()
// from output_gradient() to the column-parallel input gradient in the
// stream's scratch, then finish_backward().
#pragma once

#include <string>
#include <vector>

#include "engine/tensor_parallel/parallel_linear.h"
#include "engine/transformer/arena_buffers.h"
#include "engine/transformer/model_context.h"
#include "engine/transformer/norm.h"
#include "engine/transformer/residual_stream.h"
#include "sim/plan/task.h"

namespace sextant::engine::transformer {

/// "layers.<layer>.": the prefix of a layer's stored blocks' names.
std::string layer_prefix(int layer);

class ResidualBlock {
 public:
  /// `norm_name`: the norm's stored blocks' name within a layer ("norm1").
  ResidualBlock(ModelContext& context, ResidualStream& stream, Norm& norm, std::string norm_name);
  virtual ~ResidualBlock() = default;
  ResidualBlock(const ResidualBlock&) = delete;
  ResidualBlock& operator=(const ResidualBlock&) = delete;

  /// Reserves what layer `layer` stores from its forward to its backward: the
  /// norm's output and statistics, then the block's own (reserve_stored).
  void reserve_layer(int layer, BufferReserver& r);
  /// One pass's buffers (activation gradients, staging copies), shared by
  /// every layer and every model of the plan; then the block's workspaces.
  virtual void reserve_pass(BufferReserver& r) = 0;
  virtual void reserve_workspace(BufferReserver& /*r*/) {}
  /// After the arena is bound. `full_recompute`: the layers > 0 reserved
  /// nothing and use layer 0's set, which the recomputed forward rewrites.
  virtual void bind(bool full_recompute);

  /// The block's compute task; `recompute`: full recomputation's forward again before the backward.
  virtual void forward(int layer, bool recompute) = 0;
  virtual void backward(int layer) = 0;

  /// The Plan's tensor-parallel tasks around the block (tp > 1; see above).
  void tp_gather(int layer, bool backward);
  void tp_scatter(int layer, bool backward, bool recompute);
  void tp_all_reduce(int layer, bool backward, bool recompute);

 protected:
  /// What the tasks around the block read of a layer.
  struct Ends {
    Bf16* input = nullptr;   // the stream entering the block
    Bf16* output = nullptr;  // the stream leaving it
    int norm_gamma = LayerTensors::kAbsent;
    int norm_beta = LayerTensors::kAbsent;
    int output_bias = LayerTensors::kAbsent;  // added to the output (proj's, fc2's)
    int input_bias = LayerTensors::kAbsent;   // the block below's output bias: its gradient is
                                              // the column sum of `input`'s gradient
  };
  virtual Ends ends(int layer) const = 0;
  virtual void reserve_stored(int layer, BufferReserver& r) = 0;
  /// Whether full recomputation's forward writes the block's output again
  /// (the attention's: its output is in the shared set; not the MLP's: the
  /// next layer's input is stored).
  virtual bool recompute_writes_output() const = 0;

  /// Forward: the norm's output as the column-parallel linear reads it — the
  /// norm runs here, or under sequence parallelism ran in the all-gather task,
  /// which left its output for all tokens.
  const Bf16* normed_input(int layer);
  /// Backward: the same, as stored (under sequence parallelism, gathered again
  /// by the all-gather task for the column-parallel weight gradient).
  const Bf16* stored_normed_input(int layer) const;
  /// The forward's last product, `linear` (its parameters `p`, with the output
  /// bias) of `x`: the block's output with the bias and the residual, or under
  /// sequence parallelism the partial sums the reduce-scatter task sums.
  void project_to_output(tensor_parallel::RowParallelLinear& linear, int layer, const Bf16* x,
                         const tensor_parallel::LinearParameters& p);
  /// Backward: the gradient of the block's output for all its tokens (under
  /// sequence parallelism all-gathered by the task before).
  const Bf16* output_gradient() const;
  /// The output bias when the row-parallel backward sums its gradient; else
  /// kAbsent (the norms' backward sums it, or under sequence parallelism the
  /// all-gather task, from this rank's tokens).
  int output_bias_in_backward(int layer) const;
  /// Ends the backward with the column-parallel input gradient in the
  /// stream's scratch: the norm's backward, or under tp the collective task
  /// after the block runs it once the gradient is summed.
  void finish_backward(int layer);

  ModelContext& context_;
  ResidualStream& stream_;

 private:
  /// The stream's gradient (written, plus its old value: the residual) from
  /// `dnorm`, the gradient of the norm's output.
  void norm_backward(int layer, const Bf16* dnorm);

  Norm& norm_;
  std::string norm_name_;
  std::vector<NormActivations> norms_;  // per layer
};

}  // namespace sextant::engine::transformer
