// The transformer's forward and backward on one GPU, one Plan task at a time.
//
// Each public method is one compute task of sim/plan (embedding, attention and
// MLP blocks of a layer, the output block), so the trainer runs the Plan's
// task list and a measured task has the simulator's name. Everything works on
// buffers of one DeviceArena: the layout is fixed at construction
// (add_buffers) and nothing is allocated afterwards.
//
// Tensor parallelism (Shoeybi et al. 2019, Sec. 3): the shape is one rank's
// shard — heads, query groups, ffn and the (padded) vocabulary divided by tp —
// so QKV and fc1 are column-parallel and proj and fc2 row-parallel with no
// change to their GEMMs. Each block's collectives are the Plan's TP tasks
// after it (tp_all_reduce_task): the row-parallel output all-reduced in the
// forward (rank 0's GEMM alone adds the bias and the residual, so the sum
// counts them once), the input gradient of QKV or fc1 in the backward, then
// the norm's backward — four all-reduces of (T, h) per layer, as
// engine/tensor_parallel's linears, done here because the engine's GEMMs fuse
// bias, residual and GELU. The embedding and the output layer are
// vocabulary-parallel: each rank holds vocab/tp rows; the embedding's partial
// lookups are all-reduced, the cross entropy runs on the rank's logit columns
// with the row maxima and sums reduced over the group
// (kernels/vocab_parallel_cross_entropy.h); these collectives run inside the
// embedding and output tasks. Norms are replicated.
//
// Sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2; shape
// sequence_parallel): the residual stream, the norms and their statistics
// live on T/tp tokens per rank. Before each block the Plan's all-gather task
// (tp_gather) runs the norm on the rank's tokens and all-gathers its output
// for the column-parallel GEMM; after it the reduce-scatter task
// (tp_scatter) reduce-scatters the row-parallel GEMM's partial sums onto the
// rank's tokens and adds the residual and the bias there. The backward
// mirrors it: the all-gather task gathers the residual stream's gradient (and
// the norm's output again, for the column-parallel weight gradient: it is
// stored sharded), the reduce-scatter task scatters the column-parallel
// input gradient and runs the norm's backward. The norms' gains and shifts and
// the proj and fc2 biases then get partial gradients per rank, which the
// trainer sums over tp (ParameterLayout: partial_gradient_over_tp).
//
// Communication overlapped with the GEMMs (shape tp_comm_overlap, under sp;
// Megatron --tp-comm-overlap): the tasks and their names stay, but the
// all-gather task only starts a ring of tp chunks (the rank's sequence shard
// each) that the QKV or fc1 GEMM, run chunk by chunk in the block's task,
// consumes as the chunks arrive; proj and fc2 run chunk by chunk too, each
// chunk's partial sums sent to their owner while the next one computes, and
// the reduce-scatter task only adds them up (engine/tensor_parallel/
// chunked_collectives.h). In the backward, the residual gradient's all-gather
// is chunked the same way for proj's and fc2's input gradient; the all-gather
// of the norm's output for the column-parallel weight gradient runs while the
// block's other GEMMs and that layer's input gradient do, and the
// reduce-scatter of the input gradient while the weight gradient computes
// (Megatron's bulk overlaps); the reduce-scatter task waits for it. So the transfers' time is counted in the
// block's task, and the collective tasks time what is left exposed.
//
// Conventions (kernels/): activations and their gradients are bf16 and
// written (=); parameter gradients are fp32, written by the step's first
// micro-batch and accumulated (+=) by the others (set_accumulate_gradients), so
// gradient accumulation needs no extra buffer and no zeroing pass. The
// exceptions are the embedding tables' gradients (scatter-added: rows of tokens
// a micro-batch lacks are not touched), which the trainer zeroes each step.
//
// Fusions: the residual adds ride on the GEMM that produces the branch
// (cuBLASLt reads the residual as C) in the forward and on the norm's backward
// in the backward; GELU's backward rides on fc2's input-gradient GEMM
// (cuBLASLt's DGELU epilogue, the forward's GELU input read as its auxiliary).
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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_arena.h"
#include "engine/model/parameter_layout.h"
#include "engine/model/transformer_shape.h"
#include "kernels/bf16.h"
#include "kernels/flash_attention.h"
#include "kernels/rope.h"
#include "kernels/gemm_cublaslt.h"
#include "kernels/stream.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/task.h"

struct CUevent_st;

namespace sextant::engine {

namespace comm {
class Communicator;
}
namespace tensor_parallel {
class ChunkedCollectives;
}

using kernels::Bf16;

/// Where the parameters live: the flat buffers of parameter_layout.h.
struct ParameterBuffers {
  const Bf16* weights = nullptr;  // bf16 model weights
  float* gradients = nullptr;     // fp32, accumulated
};

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
  Transformer(const TransformerShape& shape, sim::Recompute recompute, int microbatches,
              ArenaPlan& plan, const StageParts& parts = {}, ArenaPlan::Place stored = {});

  /// Points the buffers into `arena` (made from the plan above) and the
  /// parameters into `parameters`; before any task runs. `tensor_parallel`:
  /// the rank's tp group (null: one rank), the shape then being the rank's
  /// shard (transformer_shape_of(model, layout)).
  void bind(const DeviceArena& arena, const ParameterLayout& layout, ParameterBuffers parameters,
            cudaStream_t stream, comm::Communicator* tensor_parallel = nullptr);

  // Tasks. `mb` is the micro-batch within the step; `layer` the layer index.
  void embedding_forward(int mb);
  /// recompute: the forward again before the backward (full recomputation);
  /// it rewrites the layer's stored activations and not the next layer's input.
  void attention_forward(int layer, bool recompute);
  void mlp_forward(int layer, bool recompute);
  /// Final norm, logits and the cross entropy: the micro-batch's per-token losses
  /// and, in place of the logits, their gradient scaled by `loss_scale`
  /// (1 / tokens of the global batch, for a mean over the step).
  void output_forward(int mb, float loss_scale);
  void output_backward();
  void mlp_backward(int layer);
  void attention_backward(int layer);
  void embedding_backward(int mb);

  // Tensor parallelism's collective tasks (tp > 1), each the Plan's task of
  // that name around a block (`layer`'s attention or MLP; the pass's direction).
  enum class Part { kAttention, kMlp };
  /// sp, before the block: "tp.all_gather".
  void tp_gather(Part part, int layer, bool backward);
  /// sp, after the block: "tp.reduce_scatter" (nothing for the MLP's
  /// recomputation, which writes no next input).
  void tp_scatter(Part part, int layer, bool backward, bool recompute);
  /// Without sp, after the block: "tp.all_reduce".
  void tp_all_reduce_task(Part part, int layer, bool backward, bool recompute);
  /// The Plan's tensor-parallel task of kind `kind` (kTensorParallelGather,
  /// kTensorParallelScatter or kTensorParallel): one of the three above.
  void tp_task(sim::TaskKind kind, Part part, int layer, bool backward, bool recompute);

  /// false: the backward tasks that follow write parameter gradients (the
  /// step's first micro-batch); true: they add to them. Embedding tables always add.
  void set_accumulate_gradients(bool accumulate) { accumulate_gradients_ = accumulate; }
  /// When on, each matrix product seen for the first time picks the fastest of
  /// cuBLASLt's candidate algorithms by running them all (CublasLtGemm::tune):
  /// for one throw-away pass before training, whose outputs are garbage.
  void set_tune_gemms(bool on) { gemm_->set_tune_new_problems(on); }

  /// Device arrays of the whole step, (microbatches x tokens per micro-batch):
  /// the trainer uploads tokens and targets and reads the losses back.
  std::int32_t* tokens() const { return tokens_; }
  // A pipeline stage's boundary (engine/pipeline/): the shape holds the
  // stage's layers, the parameter layout its parts (StageParts).
  /// (T, h): the first layer's input — what the previous stage sends, or the embedding writes.
  Bf16* stage_input() const { return layers_.empty() ? final_input_ : layers_[0].input; }
  /// (T, h): the last layer's output — what the next stage receives.
  Bf16* stage_output() const { return final_input_; }
  /// (T, h): the residual stream's gradient; on a stage without the output the
  /// next stage's input gradient is received here, and after the first
  /// layer's backward it holds this stage's input gradient.
  Bf16* residual_gradient() const { return dx_; }
  /// After receiving residual_gradient() on a stage without the output: the
  /// last layer's fc2 bias gradient, which output_backward's norm sums on the last stage.
  void output_gradient_received();
  std::int32_t* targets() const { return targets_; }
  float* losses() const { return losses_; }
  const TransformerShape& shape() const { return shape_; }

 private:
  // One layer's stored activations (pointers into the arena).
  struct LayerActivations {
    Bf16* input = nullptr;  // (T, h), the residual stream entering the layer; (T/tp, h) under sp
    Bf16* norm1 = nullptr;  // (T, h); (T/tp, h) under sp, as mid, norm2 and the statistics
    float* norm1_mean = nullptr;
    float* norm1_rstd = nullptr;
    // Q, K, V as the attention kernels read them, Q and K rotated for RoPE
    // models: column slices of the fused projection output `qkv` (T, qkv_width)
    // when the head dimension is the kernels' own; otherwise separate arrays
    // (T, heads, attention_head_dim) of zero-padded heads, and `qkv` is unused.
    Bf16* qkv = nullptr;
    Bf16* q = nullptr;
    Bf16* k = nullptr;
    Bf16* v = nullptr;
    Bf16* attn = nullptr;
    float* lse = nullptr;  // (heads, T) per sequence: (micro_batch, heads, seq)
    Bf16* mid = nullptr;   // (T, h), input + attention's output
    Bf16* norm2 = nullptr;
    float* norm2_mean = nullptr;
    float* norm2_rstd = nullptr;
    Bf16* fc1_out = nullptr;  // (T, fc1_width): GELU's input, or SwiGLU's [gate | up]
    Bf16* act = nullptr;      // (T, ffn), fc2's input
  };
  /// Adds a buffer to the plan; bind() points `member` at it.
  template <typename T>
  void reserve(T*& member, std::string name, MemoryCategory category, std::size_t count,
               ArenaPlan& plan);
  /// An ArenaPlan::add_shared block (see the constructor).
  template <typename T>
  void reserve_shared(T*& member, const std::string& name, MemoryCategory category, std::size_t count,
                      ArenaPlan& plan);

  kernels::FlashAttentionShape attention_shape() const;
  /// Q, K, V out of the fused row into the attention kernels' (possibly padded)
  /// arrays, and their gradients back.
  void split_qkv(LayerActivations& a);
  void merge_qkv_gradients();
  /// The attention output as the projection reads it, (T, q_width): a.attn
  /// itself, or its unpadded copy.
  const Bf16* projection_input(const LayerActivations& a);
  kernels::RopeShape rope_shape() const;
  const Bf16* weight(int tensor) const;
  float* gradient(int tensor) const;
  void norm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, int gamma, int beta);
  /// dinp (written) from dout, the gradient of the norm's output; may be the same
  /// buffer. residual_grad (may be dinp, or null) is added: the residual
  /// stream's gradient past the norm. next_bias (a tensor, or kAbsent): the
  /// bias whose gradient is the column sum of this dinp, summed on the way.
  void norm_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, int gamma, int beta,
                     const float* mean, const float* rstd, const Bf16* residual_grad,
                     int next_bias);
  /// The biases of proj and fc2 (the layers that write the residual stream)
  /// summed by the norms' backward instead of by a pass of their own: their gradient is the
  /// column sum of the residual stream's gradient (kernels/layernorm.h).
  bool residual_biases_from_norms() const;
  /// The product out = in W^T (+ b) (+ residual, when not null), for T rows.
  kernels::GemmArgs linear_args(Bf16* out, const Bf16* in, int weight_tensor, int bias_tensor, int in_width,
                                int out_width, const Bf16* residual = nullptr) const;
  /// out = in W^T (+ b) (+ residual, when not null).
  void linear_forward(Bf16* out, const Bf16* in, int weight_tensor, int bias_tensor, int in_width,
                      int out_width, const Bf16* residual = nullptr);
  /// dW (+)= dout^T in, db (+)= column sums of dout, din = dout W (din may be
  /// null); with gelu_input, din = GELU'(gelu_input) * (dout W): the gradient
  /// before the GELU that fed this layer.
  void linear_backward(Bf16* din, const Bf16* dout, const Bf16* in, int weight_tensor,
                       int bias_tensor, int in_width, int out_width, Bf16* gelu_input = nullptr);
  float gradient_beta() const { return accumulate_gradients_ ? 1.0f : 0.0f; }
  /// Tensor parallelism (Shoeybi et al. 2019, Sec. 3): `data` (count bf16) summed
  /// over the tp group in place, ordered with this stream's work.
  void tp_all_reduce(Bf16* data, std::size_t count);
  /// Sequence parallelism: (T/tp, h) shards to (T, h) and back, summed.
  void tp_all_gather(const Bf16* shard, Bf16* gathered);
  void tp_reduce_scatter(const Bf16* full, Bf16* shard);
  /// Runs `collective(tp communicator)` on the tp stream, ordered after the
  /// work queued on stream_ and before the work queued after it.
  template <typename Collective>
  void on_tp_stream(Collective&& collective);
  /// tp_comm_overlap: a column-parallel product whose input (gathered_) the
  /// all-gather task left travelling: run chunk by chunk as the chunks arrive;
  /// otherwise the whole product at once.
  void gemm_on_gathered(kernels::GemmArgs g);
  /// The product `g` (T rows over a tensor the chunked all-gather fills) run
  /// on each chunk's rows as it arrives; whole after the last one when row
  /// blocks would not be 16-byte aligned.
  void run_on_gathered_chunks(const kernels::GemmArgs& g);
  /// Under sp, a row-parallel product into scratch_ whose rows the
  /// reduce-scatter task sums: with tp_comm_overlap chunk by chunk, each
  /// chunk's partials sent to their owner as soon as they are computed.
  void gemm_then_scatter(kernels::GemmArgs g);
  /// The reduce-scatter task's sum of scratch_ onto this rank's tokens (`shard`).
  void scatter_scratch(Bf16* shard);
  /// The column-parallel backward of QKV or fc1: as linear_backward, but with
  /// tp_comm_overlap the input gradient first, its reduce-scatter started, and
  /// the weight gradient (after the norm's all-gather arrives) while it runs.
  void column_linear_backward(Bf16* din, const Bf16* dout, const Bf16* in, int weight_tensor,
                              int bias_tensor, int in_width, int out_width);
  /// The row-parallel backward of proj or fc2 under sp: as linear_backward, but
  /// with tp_comm_overlap the input gradient chunk by chunk as the all-gather
  /// task's chunks of `dout` arrive, then the weight gradient.
  void row_linear_backward(Bf16* din, const Bf16* dout, const Bf16* in, int weight_tensor, int bias_tensor,
                           int in_width, int out_width, Bf16* gelu_input = nullptr);
  /// dW (+)= dout^T in (fp32), db (+)= column sums of dout: linear_backward's first half.
  void weight_gradient(const Bf16* dout, const Bf16* in, int weight_tensor, int bias_tensor,
                       int in_width, int out_width);
  /// din (T, in) = dout W, GELU'(gelu_input) applied when not null: linear_backward's second half.
  void input_gradient(Bf16* din, const Bf16* dout, int weight_tensor, int in_width, int out_width,
                      Bf16* gelu_input);
  kernels::GemmArgs input_gradient_args(Bf16* din, const Bf16* dout, int weight_tensor, int in_width,
                                        int out_width, Bf16* gelu_input) const;
  /// Elements of one rank's token chunk of a (T, h) activation: (T/tp) x h.
  std::size_t chunk_elements() const;
  /// The residual stream entering layer + 1 (the final norm's input after the last).
  Bf16* next_input(int layer) const;
  /// The norm's backward of a block from the gradient of its output (written
  /// into dx_, with the residual's gradient added).
  void attention_norm_backward(int layer, const Bf16* dnorm);
  void mlp_norm_backward(int layer, const Bf16* dnorm);
  /// Whether this rank adds the terms a row-parallel product's all-reduce must
  /// count once (its bias and the residual): rank 0 of the tp group.
  bool adds_replicated_terms() const;

  TransformerShape shape_;
  sim::Recompute recompute_;
  int microbatches_;
  ArenaPlan::Place stored_;  // where reserve() puts this object's own blocks
  bool accumulate_gradients_ = false;
  std::vector<std::function<void(const DeviceArena&)>> binders_;
  const ParameterLayout* layout_ = nullptr;
  ParameterBuffers params_;
  cudaStream_t stream_ = nullptr;
  comm::Communicator* tp_ = nullptr;  // null or one rank: no tensor parallelism
  CUevent_st* tp_ready_ = nullptr;    // cudaEvent_t: stream_ -> the tp stream
  CUevent_st* tp_done_ = nullptr;     // the tp stream -> stream_
  // tp_comm_overlap only: the chunked collectives, and what is in flight
  // between a collective task and the block task that consumes it.
  std::unique_ptr<tensor_parallel::ChunkedCollectives> chunked_;
  bool gather_pending_ = false;             // gathered_'s chunks on their way (forward)
  bool scatter_pending_ = false;            // scratch_'s chunks sent to their owners (forward)
  bool dy_gather_pending_ = false;          // dx_full_'s chunks on their way (backward)
  CUevent_st* norm_gathered_ = nullptr;     // backward: gathered_ complete (the tp stream)
  bool norm_gather_pending_ = false;
  CUevent_st* input_grad_scattered_ = nullptr;  // backward: scratch_shard_ complete (the tp stream)
  bool input_grad_scatter_pending_ = false;

  std::vector<LayerActivations> layers_;
  Bf16* final_input_ = nullptr;  // (T, h): the last layer's output
  Bf16* final_norm_ = nullptr;
  float* final_mean_ = nullptr;
  float* final_rstd_ = nullptr;
  Bf16* logits_ = nullptr;  // (T, vocab); the cross entropy writes its gradient in place
  Bf16* dx_ = nullptr;       // (T, h), gradient of the residual stream
  Bf16* scratch_ = nullptr;  // (T, h), block outputs and norm gradients
  Bf16* dattn_ = nullptr;    // (T, q_width)
  Bf16* attn_flat_ = nullptr;    // (T, q_width): the unpadded attention output (padded heads only)
  Bf16* dattn_padded_ = nullptr; // (T, heads, attention_head_dim) (padded heads only)
  Bf16* qkv_ = nullptr;      // (T, qkv_width): the gradient of the QKV GEMM's output (and,
                             // with padded heads, the output itself before the split)
  Bf16* dq_ = nullptr;       // (T, heads, attention_head_dim), padded heads only
  Bf16* dk_ = nullptr;       // (T, kv_heads, attention_head_dim), padded heads only
  Bf16* dv_ = nullptr;
  Bf16* dact_ = nullptr;     // (T, ffn)
  Bf16* dfc1_ = nullptr;     // (T, fc1_width), SwiGLU only
  // Sequence parallelism only.
  Bf16* gathered_ = nullptr;          // (T, h): a norm's output, all-gathered
  Bf16* final_norm_shard_ = nullptr;  // (T/tp, h): the final norm's output on this rank's tokens
  Bf16* dx_full_ = nullptr;           // (T, h): the residual stream's gradient, all-gathered
  Bf16* scratch_shard_ = nullptr;     // (T/tp, h): a reduce-scattered input gradient
  Bf16* overlap_staging_ = nullptr;   // (T, h), tp_comm_overlap: the other ranks' partial
                                      // sums of this rank's chunk, block j from rank j
  // Vocabulary-parallel cross entropy (tp > 1).
  float* row_max_local_ = nullptr;  // (T)
  float* row_max_all_ = nullptr;    // (tp, T)
  float* row_max_ = nullptr;        // (T)
  float* ce_partials_ = nullptr;    // (2, T): sums of exponentials, target logits
  std::int32_t* tokens_ = nullptr;
  std::int32_t* targets_ = nullptr;
  float* losses_ = nullptr;
  char* norm_workspace_ = nullptr;
  std::size_t norm_workspace_bytes_ = 0;
  char* bias_workspace_ = nullptr;  // column partials of the bias gradients (kernels/bias_gradient.h)
  std::size_t bias_workspace_bytes_ = 0;
  char* embedding_workspace_ = nullptr;
  std::size_t embedding_workspace_bytes_ = 0;
  char* attention_workspace_ = nullptr;
  std::size_t attention_workspace_bytes_ = 0;
  char* gemm_workspace_ = nullptr;
  std::unique_ptr<kernels::CublasLtGemm> gemm_;

 public:
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;
};

}  // namespace sextant::engine
