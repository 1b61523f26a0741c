// The engine's one trainer: a rank executes its stage program of the Plan
// (sim/plan) whatever the layout — one GPU is a pipeline of one stage — then
// the optimizer: gradient clipping (Pascanu et al. 2013) and AdamW (Loshchilov
// & Hutter 2019) on fp32 master weights, and the learning-rate schedule.
//
// Program: stage_program_of(plan, this rank's stage) (pipeline/stage_program.h)
// — the Plan's compute tasks, its tensor-parallel collectives (run by the model:
// transformer.h), its pipeline sends with the receives the Plan leaves implicit,
// and the optimizer step, in the Plan's order and under the Plan's names, so the
// task timer and `run --compare` read them as the simulator's.
//
// Pipeline (pp > 1; 1F1B or interleaved 1F1B with vpp > 1 chunks per rank,
// Narayanan et al. 2021, Sec. 2.2): the stage keeps as many activation slots as
// it has chunk-micro-batches in flight at the schedule's peak (stage_program.h);
// a slot is one ArenaPlan overlay that every chunk's Transformer of that slot
// lays its stored activations over; the buffers a pass uses and leaves and the
// step's tokens, targets and losses are one set per stage. Activations and input
// gradients, bf16 (mbs·seq/(tp if sp), hidden), travel through the pp group's
// grouped send/recv as Megatron's schedules group them; the compute stream waits
// for each exchange (Megatron's blocking batched p2p).
//
// Data parallelism: rank r of the dp group runs micro-batches r, r+dp, ... of
// each global batch (every rank is handed the whole batch). The stage's fp32
// gradients are reduced over dp in the Plan's buckets (gradient_bucket_plan.h:
// the first stage's first chunk cut by size, every other chunk one bucket), each
// queued on the dp stream as soon as the action writing the last of its
// gradients has run, so the reductions overlap the rest of the backward (PyTorch
// DDP, Li et al. 2020, Sec. 3.2.3; Megatron's --overlap-grad-reduce). The loss is
// scaled by 1 / (global batch tokens), so the sum is the gradient of the global
// mean. With the distributed optimizer (zero=1; Rajbhandari et al. 2020, Sec.
// 5.1) the buckets are reduce-scattered, each rank keeps and updates the fp32
// masters and Adam moments of its block of every bucket, and the bf16 weights
// are all-gathered (data_parallel/distributed_optimizer.h) — with
// overlap_param_gather at the next step's start, each bucket waited for just
// before the first task that reads it.
//
// Tensor parallelism (Shoeybi et al. 2019) and sequence parallelism (Korthikanti
// et al. 2022): the shape is the rank's shard (transformer_shape_of(model,
// layout)); the Plan holds the collectives around each block; under sp the
// norms' and row-parallel biases' partial gradients are summed over tp
// (tensor_parallel/partial_gradients.h) before the optimizer or, with dp, before
// each bucket's reduction.
//
// The step's end: with tied embeddings and pp > 1 the first stage's wte
// gradient and the last stage's (its output layer's copy) are summed over the
// embedding group (Megatron's _allreduce_word_embedding_grads) before the
// buckets holding them are reduced; the gradient norm for clipping is the whole
// model's (each rank's sum of squares — a replicated tensor counted on tp rank 0
// only, the tied copy once — summed over tp and pp, and over dp under ZeRO-1);
// AdamW. A non-finite norm makes AdamW skip the update on the device (as
// Megatron skips). The loss: the last stage's per-token losses (gathered over
// dp), summed over pp with zeros from the other stages — exact, so every rank
// reports the mean one GPU would.
//
// Context parallelism (cp > 1; Megatron-Core's context parallelism, the
// all-gather variant of Llama 3, Dubey et al. 2024, Sec. 3.3.2): each sequence
// of S tokens is cut into 2·cp chunks and cp rank r holds chunks r and
// 2·cp−1−r back to back (engine/model/context_parallel_chunks.h), so the
// shape's seq is S/cp. Each rank uploads its two chunks of every sequence of
// its dp rank's micro-batches (inputs and targets alike); the attention core
// exchanges K/V over the cp group inside the attention task (the Plan is built
// on the local sequence with cp = 1, so it holds no cp task the program cannot
// run); RoPE and the learned positions take each local token's position in the
// whole sequence. The loss scale is 1/(gbs·S). cp ranks hold the same weights:
// every gradient is summed over dp x cp (the kDpCp group: Megatron-Core reduces
// dense gradients over the data-and-context-parallel group), the distributed
// optimizer shards over dp x cp, and the per-token losses are gathered over it.
//
// Initial weights do not depend on the layout: element (i, j) of a whole tensor
// is drawn from the counter-based stream of the tensor's index in the whole
// model (kernels/parameter_init.h) at its index in the whole tensor, and each
// rank draws exactly its shard's elements (trainer_arrays.h:
// draw_initial_shard), so the same seed gives the same model at any tp and pp.
//
// One GPU (no group of more than one rank): the forward and backward of a step
// are one CUDA graph, captured on the first step and replayed, the optimizer
// launched after it (its learning rate changes per step); cuBLASLt's fastest
// algorithm for each product is timed once at construction (tune_gemms; also
// under dp, not under tp or pp, whose ranks must compute alike or exchange).
//
// Memory: everything lives in one DeviceArena made by the constructor: bf16
// weights (2 B/param), fp32 gradients (4), fp32 master weights and two Adam
// moments (12, or 12/dp under ZeRO-1) — Megatron's mixed-precision optimizer
// (Rajbhandari et al. 2020, Sec. 3.1) — plus the Transformers' buffers.
//
// DeepSeek-V3's auxiliary-loss-free balancing (options.moe.expert_bias_update_rate
// > 0, the sigmoid router; Liu et al. 2024, arXiv:2412.19437, Sec. 2.1.2): the
// stage's MoE layers' selection biases, fp32 (MoE layers, experts), zero at
// construction, live in the arena beside the step's load (int32, the same shape),
// which every counted router forward adds its tokens per expert to (not full
// recomputation's second forward). After the optimizer the loads are summed over
// the dp x cp group — every rank of a stage that routes other tokens: the ep group
// is folded inside dp x cp (Megatron's MoE parallel folding) and MoE layers run at
// tp = 1, where Megatron sums over tp x dp x cp for sequence-parallel shards — and
// each bias moves by the rate towards the mean load (trainer_expert_bias.cc), so
// every rank of the stage keeps the same biases. Megatron-Core updates them in
// finalize_model_grads (_update_router_expert_bias), after the backward and
// whether or not the optimizer then skips the step; so does this trainer.
// Checkpoints keep them (TrainerState::expert_biases; Megatron keeps expert_bias
// as a persistent buffer of the state dict), by MoE layer, so they follow a
// layer to another pipeline stage on a resharded load.
//
// Not here (std::invalid_argument): cp with ep or MoE layers, etp, ZeRO-2/3,
// zero-bubble schedules.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/trainer_state.h"
#include "engine/comm/parallel_groups.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/data_parallel/optimizer_buffers.h"
#include "engine/device_arena.h"
#include "engine/model/context_parallel_chunks.h"
#include "engine/model/gradient_bucket_plan.h"
#include "engine/model/lr_schedule.h"
#include "engine/model/parameter_layout.h"
#include "engine/model/transformer_shape.h"
#include "engine/pipeline/stage_program.h"
#include "engine/task_timer.h"
#include "engine/tensor_parallel/partial_gradients.h"
#include "engine/transformer.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/plan.h"

struct CUgraphExec_st;  // cudaGraphExec_t is a pointer to it (cuda_runtime_api.h)
struct CUevent_st;      // cudaEvent_t

namespace sextant::engine {

using pipeline::StageAction;
using pipeline::StageProgram;

namespace data_parallel {
class DistributedOptimizer;
}

struct OptimizerSettings {
  double beta1 = 0.9;   // GPT-3 (Brown et al. 2020, App. B): beta2 0.95, eps 1e-8,
  double beta2 = 0.95;  // weight decay 0.1, gradients clipped at norm 1.0
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // <= 0: no clipping
};

/// How a run trains, beside its layout (which says mbs, gbs, recompute and the
/// parallelism: the trainer's constructor).
struct TrainerOptions {
  OptimizerSettings optimizer;
  LrSchedule lr;
  std::uint64_t seed = 1234;
  double init_std = 0.02;  // Megatron --init-method-std default
  bool time_tasks = false;
  /// Pick each matrix product's fastest cuBLASLt algorithm (of the heuristic's
  /// first 16) in one throw-away forward and backward at construction; off, the
  /// heuristic's first choice. Ignored under tensor and pipeline parallelism
  /// (the tp ranks must compute the replicated tensors' gradients alike; the
  /// stages would have to exchange).
  bool tune_gemms = true;
  /// Replay the forward and backward of a step as one CUDA graph (captured on
  /// the first step) instead of launching its kernels one by one; only on one
  /// GPU, and ignored when time_tasks (the per-task events need the launches).
  bool use_cuda_graph = true;
  /// Gradient elements per data-parallel bucket: Megatron-Core DDP's default
  /// bucket of 40M parameters (sim::default_bucket_params). Unused at dp = 1.
  std::size_t bucket_elements = kDefaultBucketElements;
  /// The longest the host waits for a step's collectives: past it, the
  /// group's synchronize throws comm::CommError naming the group, the rank and
  /// the collective, and every communicator of the trainer is aborted, so no
  /// rank hangs on a peer that stopped. NCCL users' 10 minutes (PyTorch's
  /// default process-group timeout).
  std::chrono::milliseconds comm_timeout = std::chrono::minutes(10);
  /// How an MoE model's layers route and balance (its router_loss_weight is
  /// the trainer's to set: mbs / gbs).
  transformer::MoeOptions moe;
};

struct StepResult {
  int step = 0;  // 1-based
  double loss = 0;       // mean cross entropy over the global batch
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool skipped = false;  // non-finite gradient norm: no update (as Megatron skips)
  double seconds = 0;    // wall time of the step, host to host
  std::vector<TaskTime> tasks;  // when time_tasks
  /// What this rank's MoE layers routed in the step (empty for a dense model).
  transformer::MoeStatistics moe;
};

class Trainer {
 public:
  /// Builds the Plan of `layout` and this rank's stage program, plans and
  /// allocates the arena, draws the initial weights from the seed. Reads the
  /// layout's tp, sp, pp, vpp, dp, zero, overlap_param_gather, mbs, gbs,
  /// recompute, schedule and split knobs; `groups` are the rank's
  /// (comm/parallel_groups.h; default: one GPU), their sizes the layout's, and
  /// they must outlive the trainer. Every rank of the world makes its trainer
  /// with the same model, layout and options. Throws std::invalid_argument for
  /// what the engine does not run or an inconsistent layout, kernels::CudaError
  /// when the GPU or its memory is missing.
  Trainer(const sim::ModelConfig& model, const sim::ParallelLayout& layout, const TrainerOptions& options,
          const comm::ParallelGroups& groups = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// One optimizer step over the global batch: inputs and targets hold
  /// global_batch x seq tokens each (the whole batch on every rank); loss and
  /// gradient norm are the whole model's.
  StepResult step(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  /// Forward and backward without the optimizer: the gradients (summed over dp,
  /// tied copies summed) stay in the buffers (gradient()); returns the mean loss.
  double forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);

  const sim::ParallelLayout& parallel_layout() const { return layout_; }
  /// The rank's tp shard, every layer.
  const TransformerShape& shape() const { return shape_; }
  int stage() const { return stage_; }
  const sim::Plan& plan() const { return plan_; }
  const StageProgram& program() const { return program_; }
  /// This rank's model chunks' parameter layouts, in the order of its flat
  /// buffers (a copy), and one of them (chunk 0 is the whole model at pp = 1).
  std::vector<ParameterLayout> chunk_layouts() const;
  const ParameterLayout& chunk_layout(std::size_t chunk) const { return chunks_.at(chunk).layout; }
  /// The tensors this rank holds, by the whole model's names ("layers.5.qkv_weight").
  std::vector<std::string> tensor_names() const;
  /// This rank's parameters: its tp shard of its stage's tensors.
  std::int64_t parameter_count() const;
  const ArenaPlan& memory_plan() const { return arena_->plan(); }
  std::size_t arena_bytes() const { return arena_->bytes(); }
  /// Elements of the flat weight and gradient buffers (padded for ZeRO-1).
  std::size_t flat_elements() const { return buffer_elements_; }
  int steps_done() const { return steps_done_; }
  int data_parallel_size() const { return dp_ == nullptr ? 1 : dp_->size(); }
  /// Ranks each sequence is split over (1 without context parallelism).
  int context_parallel_size() const { return cp_ == nullptr ? 1 : cp_->size(); }
  /// This rank's micro-batches per step.
  int local_microbatches() const { return microbatches_; }
  /// The data-parallel buckets (empty at dp = 1), in buffer order.
  const std::vector<GradientBucketRange>& gradient_buckets() const { return buckets_; }
  /// Per gradient bucket: whether it holds expert tensors (ep > 1; all false otherwise).
  const std::vector<bool>& expert_gradient_buckets() const { return expert_bucket_; }
  std::size_t tasks_per_step() const { return program_.actions.size(); }
  /// What this rank's MoE layers routed since the last call: tokens per expert
  /// of each MoE layer of its chunks, in chunk then layer order, summed over
  /// the activation slots; the router losses' sums. Empty for a dense model.
  transformer::MoeStatistics take_moe_statistics();
  /// DeepSeek-V3's balancing (TrainerOptions::moe.expert_bias_update_rate > 0):
  /// this rank's MoE layers' selection biases, (MoE layers of its chunks, in chunk
  /// then layer order) x experts; empty when off. Waits for the GPU.
  std::vector<std::vector<float>> expert_biases() const;
  /// The load the last update read: each MoE layer's tokens per expert over the
  /// last step's micro-batches, summed over dp x cp (full recomputation's second
  /// forward not counted); shaped as expert_biases(). Waits for the GPU.
  std::vector<std::vector<std::int32_t>> expert_loads() const;

  // By the whole model's names, of tensors this rank holds (std::out_of_range otherwise).
  /// Sets the fp32 master copy and the bf16 weights (rounded) of one tensor
  /// (under ZeRO-1, the rank's part of the master copy; it then uses the
  /// gradient buffer as scratch).
  void set_parameter(const std::string& name, std::span<const float> values);
  /// Under ZeRO-1, NaN where another rank holds the master copy.
  std::vector<float> master_parameter(const std::string& name) const;
  /// The bf16 weights the model computes with, as floats.
  std::vector<float> weight(const std::string& name) const;
  /// Under ZeRO-1, only this rank's blocks hold the group's sum.
  std::vector<float> gradient(const std::string& name) const;
  /// Overwrites this rank's gradient of one tensor (tests: a NaN where a step would make one).
  void set_gradient(const std::string& name, std::span<const float> values);

  /// After a step whose gradient norm is not finite (every rank of the world
  /// calls it then: it reduces over tp and dp and gathers over pp): the name of
  /// the first tensor, in the whole model's order, whose gradient is not
  /// finite; "" when none is (trainer_nonfinite.cc).
  std::string first_nonfinite_gradient();

  /// What a checkpoint keeps of this rank (engine/checkpoint/trainer_state.h):
  /// the flat bf16 weights, the fp32 master weights and Adam moments (the
  /// rank's ZeRO-1 shard), DeepSeek-V3's expert biases (when on) and the
  /// updates done. Waits for the GPU.
  checkpoint::TrainerState state() const;
  /// Puts a state() back: the next step continues as the saved trainer's
  /// would have. Throws std::invalid_argument naming the array whose length
  /// differs from this trainer's (another model or layout). Expert biases: a
  /// state without them (a run without the balancing) starts them at zero; a
  /// trainer without the balancing ignores a state's.
  void restore(const checkpoint::TrainerState& state);

 private:
  // One model chunk: its parameters (a range of the flat buffers) and one
  // Transformer per activation slot of the stage (slots[slot]).
  struct Chunk {
    Chunk(const TransformerShape& shape, const StageParts& parts) : shape(shape), parts(parts), layout(shape, parts) {}
    TransformerShape shape;
    StageParts parts;
    ParameterLayout layout;
    std::size_t offset = 0;  // elements into the flat buffers
    std::vector<std::unique_ptr<Transformer>> slots;
    /// tp > 1 with sp: the norms' and row-parallel biases' gradients, partial
    /// sums over this rank's tokens, summed over tp.
    std::unique_ptr<tensor_parallel::PartialGradients> partial_gradients;
  };
  struct Located {
    const Chunk* chunk;
    const ParameterTensor* tensor;
  };
  Located find(const std::string& name) const;

  // trainer.cc
  void build_chunks();
  void plan_memory();
  void upload(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  /// cp > 1: this rank's two chunks of each of its sequences.
  void upload_local_chunks(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  /// Queues the step's program; the optimizer (for update number `step`) only
  /// when step > 0. Nothing waits for the GPU.
  void run_program(int step);
  void run_compute(const StageAction& action, float loss_scale);
  void exchange(const StageAction& action);
  void zero_embedding_gradients();
  void initialise_parameters(const sim::ModelConfig& model);
  /// Runs `op` (a collective on `group`) ordered after the compute stream's
  /// work so far, and the compute stream's later work after it.
  void on_group(comm::Communicator& group, const std::function<void()>& op);
  /// The bf16 weights' gathers overlap_param_gather left pending, completed.
  void settle_parameter_gathers() const;
  /// Waits for the work queued on the compute stream; with groups through
  /// their synchronize(comm_timeout), every group aborted when one fails.
  void wait_for_compute_stream();
  /// The communicators the trainer uses (tp, dp, pp, embedding: those that exist).
  std::vector<comm::Communicator*> groups_in_use() const;

  // trainer_expert_bias.cc: DeepSeek-V3's balancing (the file comment above).
  bool balances_experts() const { return options_.moe.expert_bias_update_rate > 0; }
  /// MoE layers of this rank's chunks (the rows of the biases and loads).
  int stage_moe_layers() const;
  /// Values of the biases (and of the loads): stage MoE layers x experts; 0 when off.
  std::size_t expert_bias_values() const;
  /// The biases' and loads' arena blocks; after the arena: their pointers,
  /// zeroed, bound to every slot's MoE layers.
  void plan_expert_balancing(ArenaPlan& memory);
  void bind_expert_balancing();
  /// Before a step's program: the loads start from zero.
  void reset_expert_load();
  /// After the optimizer: the loads summed over dp x cp, each bias moved.
  void update_expert_biases();
  /// restore()'s part: (stage MoE layers x experts) values, or none.
  void restore_expert_biases(const std::vector<float>& biases);

  // trainer_graph.cc: one GPU's CUDA graph, and the GEMM tuning pass.
  /// run_program(0) through the CUDA graph when the step can be one, else
  /// directly; then the optimizer for update `step` when step > 0.
  void queue_step(int step);
  bool runs_as_graph() const;
  void capture_graph();
  void tune_gemms();

  // trainer_gradients.cc: buckets, reductions, the norm and the optimizer, the loss.
  /// dp > 1: buckets_ as the Plan makes them, when each is reduced, and under
  /// overlap_param_gather which action first reads each.
  void plan_gradient_buckets_of_stage();
  /// The buckets reduced over dp: all of them, or with ep > 1 those of no
  /// expert tensor (`expert`: the others, reduced over the expert-dp group).
  std::vector<data_parallel::GradientBucket> bucket_ranges(bool expert = false) const;
  /// sp: the partial gradients in [begin, end) of the flat buffers summed over tp.
  void sum_partial_gradients(std::size_t begin, std::size_t end);
  /// sp sums, then bucket `b`'s dp (or expert-dp) reduction queued.
  void reduce_bucket(int b);
  /// After the program's compute: the tied embedding's sum, the buckets waiting
  /// for it, and the dp reductions' end.
  void finish_gradients();
  /// The update of the weights (queue_weight_update), then of DeepSeek-V3's expert biases.
  void queue_optimizer(int step);
  /// AdamW on the clipped gradients (ZeRO-1: on this rank's shards).
  void queue_weight_update(int step);
  /// Waits for the step; the mean loss and, when `grad_norm` is not null, the
  /// gradient norm the optimizer computed.
  double read_results(double* grad_norm);
  bool is_tied_copy(const Chunk& chunk, int tensor) const;
  /// The ranges of the flat buffers whose gradients count in this rank's part
  /// of the norm: every tensor but a replicated one off tp rank 0 and the tied
  /// copy; padding between counted tensors included (it is zero). With
  /// `expert_only` set, only the tensors whose ParameterTensor::expert is it.
  std::vector<ElementRange> norm_ranges(std::optional<bool> expert_only = std::nullopt) const;

  sim::ParallelLayout layout_;
  TransformerShape shape_;  // the rank's tp shard, every layer
  TrainerOptions options_;
  sim::Plan plan_;
  StageProgram program_;
  int stage_ = 0;
  int microbatches_ = 1;  // this rank's per step
  comm::Communicator* pp_ = nullptr;         // pp > 1 only
  comm::Communicator* dp_ = nullptr;         // dp > 1 only: picks the micro-batches
  comm::Communicator* cp_ = nullptr;         // cp > 1 only: the attention core's K/V exchanges
  // dp x cp > 1 only (dp_ at cp = 1): the ranks holding the same weights, which
  // reduce the gradients, shard the distributed optimizer and gather the losses.
  comm::Communicator* replicas_ = nullptr;
  comm::Communicator* tp_ = nullptr;         // tp > 1 only
  comm::Communicator* embedding_ = nullptr;  // tied embeddings with pp > 1: the first and last stage
  comm::Communicator* ep_ = nullptr;         // ep > 1 only
  comm::Communicator* expert_dp_ = nullptr;  // ep > 1 with dp / ep > 1: the expert tensors' replicas
  std::unique_ptr<data_parallel::GradientReducer> reducer_;
  std::unique_ptr<data_parallel::GradientReducer> expert_reducer_;  // expert_dp_ only
  std::vector<GradientBucketRange> buckets_;  // dp x cp > 1
  std::optional<ContextParallelChunks> sequence_split_;  // cp > 1: this rank's two chunks of a sequence
  std::vector<std::int32_t> local_inputs_, local_targets_;  // cp > 1: the step's local tokens, on the host
  std::vector<bool> expert_bucket_;           // per bucket: holds expert tensors (ep > 1)
  std::vector<int> reducer_index_;            // per bucket: its index in its reducer's list
  std::vector<std::vector<int>> buckets_after_action_;   // by action index
  std::vector<int> after_schedule_;                      // buckets holding a tied embedding copy
  std::vector<std::vector<int>> gathers_before_action_;  // by action index (overlap_param_gather)
  std::unique_ptr<data_parallel::DistributedOptimizer> sharded_;  // zero=1, dp x cp > 1
  std::vector<Chunk> chunks_;
  std::size_t elements_ = 0;         // the chunks' parameters
  std::size_t buffer_elements_ = 0;  // the flat buffers: elements_, padded for the sharded optimizer
  std::size_t master_elements_ = 0;  // buffer_elements_, or this rank's shard
  std::vector<ElementRange> decayed_;  // the chunks' decayed ranges, in the flat buffers
  std::unique_ptr<DeviceArena> arena_;
  // DeepSeek-V3's balancing (balances_experts()): (stage_moe_layers(), experts) each.
  ArenaPlan::Slot expert_biases_slot_ = -1, expert_load_slot_ = -1;
  float* expert_biases_ = nullptr;        // fp32 selection biases
  std::int32_t* expert_load_ = nullptr;   // int32 tokens per expert of the step
  data_parallel::OptimizerBuffers buffers_;  // weights, gradients, masters, Adam moments, norm scratch
  float* losses_ = nullptr;           // pp > 1: (local micro-batches x tokens), the last stage's, else zeros
  float* gathered_losses_ = nullptr;  // (global batch x whole sequence), dp x cp > 1
  bool reduce_gradients_ = true;      // off for the GEMM-tuning pass
  cudaStream_t stream_ = nullptr;
  CUevent_st* to_comm_ = nullptr;    // cudaEvent_t: compute -> a communicator's stream
  CUevent_st* from_comm_ = nullptr;  // and back
  CUgraphExec_st* graph_ = nullptr;  // cudaGraphExec_t: one GPU's forward and backward, captured
  TaskTimer timer_;
  int steps_done_ = 0;
  std::string task_name_;  // reused buffer
  std::vector<comm::PeerTransfer> sends_, receives_;  // reused by exchange()
};

}  // namespace sextant::engine
