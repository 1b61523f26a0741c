// The transformer's forward and backward on one GPU, one Plan task at a time:
// the composition of the model's parts, split by concern as Megatron-Core
// splits them (engine/transformer/):
//
//   embedding.h         token (and learned position) embedding, vocabulary-parallel under tp
//   attention.h         the self-attention block: norm1, QKV, RoPE, the core, proj
//     attention_core.h  the core's interface; flash_attention_core.h the one on whole sequences
//   mlp.h               the MLP block: norm2, fc1, GELU or SwiGLU, fc2
//   output_layer.h      final norm, LM head and (vocabulary-parallel) cross entropy
//   norm.h              LayerNorm or RMSNorm, shared by the parts
//   residual_block.h    what the attention and MLP blocks share: the pre-norm
//                       residual structure and the tp tasks around a block
// and engine/tensor_parallel/ for the column- and row-parallel linears
// (parallel_linear.h), their collectives (collectives.h), sequence
// parallelism's exchanges and their overlap with the GEMMs
// (sequence_parallel.h, chunked_collectives.h) and the vocabulary-parallel
// cross entropy.
//
// Each public method is one compute task of sim/plan (embedding, attention and
// MLP blocks of a layer, the output block) or one tensor-parallel task around
// a block, so the trainer runs the Plan's task list and a measured task has
// the simulator's name. Everything works on buffers of one DeviceArena: the
// layout is fixed at construction and nothing is allocated afterwards.
//
// Tensor parallelism (Shoeybi et al. 2019, Sec. 3): the shape is one rank's
// shard — heads, query groups, ffn and the (padded) vocabulary divided by tp.
// Sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) keeps the
// residual stream and the norms on T/tp tokens per rank; with tp_comm_overlap
// the collectives run in chunks beside the GEMMs (residual_block.h,
// tensor_parallel/sequence_parallel.h). The norms' gains and shifts and the
// proj and fc2 biases then get partial gradients per rank, which the trainer
// sums over tp (ParameterLayout: partial_gradient_over_tp).
//
// Conventions (kernels/): activations and their gradients are bf16 and
// written (=); parameter gradients are fp32, written by the step's first
// micro-batch and accumulated (+=) by the others (set_accumulate_gradients), so
// gradient accumulation needs no extra buffer and no zeroing pass. The
// exceptions are the embedding tables' gradients (scatter-added: rows of tokens
// a micro-batch lacks are not touched), which the trainer zeroes each step.
//
// Stored per layer for the backward (recompute none or selective; Korthikanti
// et al. 2022, Sec. 4, with flash attention, so the attention core's s x s
// tensors never exist and selective recomputation stores the same set):
// the layer input, the first norm's output and statistics, Q, K, V (the fused
// projection's output, rotated for RoPE models), the attention
// output and its log-sum-exp, the residual after attention, the second norm's
// output and statistics, the activation's input (fc1 output) and fc2's input:
// 16 x tokens x hidden bf16 values for GPT's f = 4h, as sim/memory counts.
// Full recomputation stores only each layer's input and re-runs the layer's
// forward into one shared set of buffers before its backward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_arena.h"
#include "engine/model/parameter_layout.h"
#include "engine/model/transformer_shape.h"
#include "engine/transformer/arena_buffers.h"
#include "engine/transformer/attention.h"
#include "engine/transformer/embedding.h"
#include "engine/transformer/mlp.h"
#include "engine/transformer/model_context.h"
#include "engine/transformer/moe_layer.h"
#include "engine/transformer/norm.h"
#include "engine/transformer/output_layer.h"
#include "engine/transformer/residual_stream.h"
#include "kernels/bf16.h"
#include "kernels/stream.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/task.h"

namespace sextant::engine {

namespace comm {
class Communicator;
}

class Transformer {
 public:
  /// Registers every activation, gradient scratch and workspace buffer of a
  /// step of `microbatches` micro-batches in `plan` (tokens, targets and
  /// per-token losses for all of them). Needs a CUDA device (CUB's sort space).
  /// What one micro-batch stores from its forward to its backward, and the
  /// residual stream's gradient (a pipeline's send and receive buffer), are
  /// this object's own; the buffers a pass uses and leaves (activation
  /// gradients, gathered and scattered shards, workspaces) and the step's
  /// tokens, targets and losses are ArenaPlan::add_shared blocks, one set for
  /// every Transformer of `plan` — they must take turns on one stream (a
  /// pipeline stage's activation slots do).
  /// `parts`: a pipeline stage's chunk without the embedding (output) has no
  /// tokens (final norm, logits, targets, losses) and runs no such task.
  /// `stored`: where this object's own blocks go — by default the plan's
  /// sequence; a pipeline stage's activation slot (an ArenaPlan overlay) for a
  /// Transformer of one chunk in one slot, the residual stream's gradient
  /// first so that it sits at the same place for every chunk of the slot.
  /// `moe`: how an MoE model's layers route (shape.moe(): MoE layers from
  /// shape.first_dense_layers on, counted in the whole model from parts.first_layer).
  Transformer(const TransformerShape& shape, sim::Recompute recompute, int microbatches,
              ArenaPlan& plan, const StageParts& parts = {}, ArenaPlan::Place stored = {},
              const transformer::MoeOptions& moe = {});

  /// Points the buffers into `arena` (made from the plan above) and the
  /// parameters into `parameters`; before any task runs. `tensor_parallel`:
  /// the rank's tp group (null: one rank), the shape then being the rank's
  /// shard (transformer_shape_of(model, layout)); `expert_parallel`: its ep
  /// group (null: one rank), which the MoE layers exchange tokens over;
  /// `context_parallel`: its cp group (null: one rank), the shape's seq then
  /// being the rank's two chunks of each sequence, which the attention core
  /// exchanges K/V over and whose positions RoPE and the learned positions take.
  void bind(const DeviceArena& arena, const ParameterLayout& layout, ParameterBuffers parameters,
            cudaStream_t stream, comm::Communicator* tensor_parallel = nullptr,
            comm::Communicator* expert_parallel = nullptr, comm::Communicator* context_parallel = nullptr);

  // Tasks. `mb` is the micro-batch within the step; `layer` the layer index.
  void embedding_forward(int mb) { embedding_.forward(mb); }
  /// recompute: the forward again before the backward (full recomputation);
  /// it rewrites the layer's stored activations and not the next layer's input.
  void attention_forward(int layer, bool recompute) { block(Part::kAttention, layer).forward(layer, recompute); }
  void mlp_forward(int layer, bool recompute) { block(Part::kMlp, layer).forward(layer, recompute); }
  /// Final norm, logits and the cross entropy: the micro-batch's per-token losses
  /// and, in place of the logits, their gradient scaled by `loss_scale`
  /// (1 / tokens of the global batch, for a mean over the step).
  void output_forward(int mb, float loss_scale) { output_.forward(mb, loss_scale); }
  void output_backward() { output_.backward(); }
  void mlp_backward(int layer) { block(Part::kMlp, layer).backward(layer); }
  void attention_backward(int layer) { block(Part::kAttention, layer).backward(layer); }
  void embedding_backward(int mb) { embedding_.backward(mb); }

  // Tensor parallelism's collective tasks (tp > 1), each the Plan's task of
  // that name around a block (`layer`'s attention or MLP; the pass's direction).
  enum class Part { kAttention, kMlp };
  /// sp, before the block: "tp.all_gather".
  void tp_gather(Part part, int layer, bool backward) { block(part, layer).tp_gather(layer, backward); }
  /// sp, after the block: "tp.reduce_scatter" (nothing for the MLP's
  /// recomputation, which writes no next input).
  void tp_scatter(Part part, int layer, bool backward, bool recompute) {
    block(part, layer).tp_scatter(layer, backward, recompute);
  }
  /// Without sp, after the block: "tp.all_reduce".
  void tp_all_reduce_task(Part part, int layer, bool backward, bool recompute) {
    block(part, layer).tp_all_reduce(layer, backward, recompute);
  }
  /// The Plan's tensor-parallel task of kind `kind` (kTensorParallelGather,
  /// kTensorParallelScatter or kTensorParallel): one of the three above.
  void tp_task(sim::TaskKind kind, Part part, int layer, bool backward, bool recompute);

  /// false: the backward tasks that follow write parameter gradients (the
  /// step's first micro-batch); true: they add to them. Embedding tables always add.
  void set_accumulate_gradients(bool accumulate) { context_.set_accumulate_gradients(accumulate); }
  /// When on, each matrix product seen for the first time picks the fastest of
  /// cuBLASLt's candidate algorithms by running them all (CublasLtGemm::tune):
  /// for one throw-away pass before training, whose outputs are garbage.
  void set_tune_gemms(bool on) {
    context_.gemm().set_tune_new_problems(on);
    if (moe_) moe_->set_tune_gemms(on);
  }

  /// Device arrays of the whole step, (microbatches x tokens per micro-batch):
  /// the trainer uploads tokens and targets and reads the losses back.
  std::int32_t* tokens() const { return embedding_.tokens(); }
  // A pipeline stage's boundary (engine/pipeline/): the shape holds the
  // stage's layers, the parameter layout its parts (StageParts).
  /// (T, h): the first layer's input — what the previous stage sends, or the embedding writes.
  Bf16* stage_input() const { return residual_.first_input(); }
  /// (T, h): the last layer's output — what the next stage receives.
  Bf16* stage_output() const { return residual_.final_input; }
  /// (T, h): the residual stream's gradient; on a stage without the output the
  /// next stage's input gradient is received here, and after the first
  /// layer's backward it holds this stage's input gradient.
  Bf16* residual_gradient() const { return residual_.gradient; }
  /// After receiving residual_gradient() on a stage without the output: the
  /// last layer's fc2 bias gradient, which output_backward's norm sums on the last stage.
  void output_gradient_received();
  std::int32_t* targets() const { return output_.targets(); }
  float* losses() const { return output_.losses(); }
  const TransformerShape& shape() const { return context_.shape(); }
  /// What this model's MoE layers routed since the last call (empty without them).
  transformer::MoeStatistics take_moe_statistics() { return moe_ ? moe_->take_statistics() : transformer::MoeStatistics{}; }
  /// DeepSeek-V3's balancing: this model's MoE layers' selection biases and the
  /// step's load (transformer::MoeLayer::bind_expert_balancing); nothing without MoE layers.
  void bind_expert_balancing(const float* biases, std::int32_t* step_load) {
    if (moe_) moe_->bind_expert_balancing(biases, step_load);
  }

  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

 private:
  /// The block in place `part` of layer `layer`: the same for every layer of
  /// a dense model (an MoE model's MLP place holds an MoE layer in its MoE layers).
  transformer::ResidualBlock& block(Part part, int layer);
  /// Sequence parallelism's buffers (transformer/residual_block.h).
  void reserve_sequence_parallel(transformer::BufferReserver& r);

  transformer::ModelContext context_;
  sim::Recompute recompute_;
  transformer::ArenaBindings bindings_;
  transformer::ResidualStream residual_;
  transformer::Norm norm_;
  transformer::Embedding embedding_;
  transformer::SelfAttention attention_;
  transformer::Mlp mlp_;
  std::unique_ptr<transformer::MoeLayer> moe_;  // an MoE model's MoE layers' block
  int first_layer_ = 0;                         // the whole model's index of layer 0
  transformer::OutputLayer output_;
};

}  // namespace sextant::engine
