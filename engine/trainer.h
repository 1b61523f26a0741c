// Training one model replica: the Plan of a one-GPU layout (sim/plan)
// executed task by task on the Transformer, then the optimizer — gradient
// clipping (Pascanu et al. 2013) and AdamW (Loshchilov & Hutter 2019) on fp32
// master weights — and the learning-rate schedule.
//
// Data parallelism: given a data-parallel communicator of dp > 1 ranks, rank r
// runs micro-batches r, r+dp, r+2dp, ... of each global batch (every rank is
// handed the whole batch and takes its share), and the fp32 gradients are
// summed over the group in buckets (engine/model/gradient_bucket_plan.h),
// each queued on the communicator's stream as soon as the last micro-batch's
// backward has written it (engine/data_parallel/gradient_reducer.h), so the
// reductions overlap the rest of the backward. The loss is scaled by
// 1 / (global batch tokens), so the sum is the gradient of the global mean,
// and every rank applies the same update to the same weights (the weights
// start equal: the same seed and kernels). The reported loss is the mean over
// the whole global batch, summed in the order one rank would. With
// distributed_optimizer (zero=1), the gradients are reduce-scattered instead
// and each rank keeps and updates the fp32 master weights and Adam moments of
// its block of every bucket only (engine/data_parallel/distributed_optimizer.h),
// then the bf16 weights are all-gathered. With no
// communicator, or one of one rank, nothing of this exists: the step is the
// single-GPU one (one CUDA graph, no extra kernel or synchronisation).
//
// Tensor parallelism: given a tp communicator, the Plan is built with the
// layout's tp (and sp), so it holds the collectives around each block, which
// run as tasks by their names (transformer.h); under sequence parallelism the
// norms' and residual biases' partial gradients are summed over tp
// (tensor_parallel/partial_gradients.h) before the optimizer or, with dp, before
// each bucket's reduction.
//
// Memory: everything lives in one DeviceArena made by the constructor:
// bf16 weights (2 B/param), fp32 gradients (4), fp32 master weights and two
// Adam moments (12) — the 18 bytes per parameter of Megatron's mixed-precision
// optimizer without ZeRO (Rajbhandari et al. 2020, Sec. 3.1: 2 + 4 + 12, the
// fp32 gradient buffer as Megatron keeps it) — plus the Transformer's buffers.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/trainer_state.h"
#include "engine/data_parallel/optimizer_buffers.h"
#include "engine/device_arena.h"
#include "engine/model/gradient_bucket_plan.h"
#include "engine/model/lr_schedule.h"
#include "engine/model/parameter_layout.h"
#include "engine/model/transformer_shape.h"
#include "engine/task_timer.h"
#include "engine/transformer.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/plan.h"

struct CUgraphExec_st;  // cudaGraphExec_t is a pointer to it (cuda_runtime_api.h)
struct CUevent_st;      // cudaEvent_t

namespace sextant::engine {

namespace comm {
class Communicator;
}
namespace data_parallel {
class GradientReducer;
class DistributedOptimizer;
}
namespace tensor_parallel {
class PartialGradients;
}

struct OptimizerSettings {
  double beta1 = 0.9;   // GPT-3 (Brown et al. 2020, App. B): beta2 0.95, eps 1e-8,
  double beta2 = 0.95;  // weight decay 0.1, gradients clipped at norm 1.0
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // <= 0: no clipping
};

struct TrainerOptions {
  int micro_batch = 1;
  int global_batch = 1;  // a multiple of micro_batch; the step's micro-batches = gbs / mbs
  sim::Recompute recompute = sim::Recompute::kNone;
  OptimizerSettings optimizer;
  LrSchedule lr;
  std::uint64_t seed = 1234;
  double init_std = 0.02;  // Megatron --init-method-std default
  bool time_tasks = false;
  /// Pick each matrix product's fastest cuBLASLt algorithm (of the heuristic's
  /// first 16) in one throw-away forward and backward at construction; off, the
  /// heuristic's first choice. Ignored under tensor parallelism (the tp ranks
  /// must compute the replicated tensors' gradients alike).
  bool tune_gemms = true;
  /// Replay the forward and backward of a step as one CUDA graph (captured on
  /// the first step) instead of launching its ~35 kernels per layer one by one;
  /// ignored when time_tasks (the per-task events need the launches).
  bool use_cuda_graph = true;
  /// Gradient elements per data-parallel bucket: Megatron-Core DDP's default
  /// bucket of 40M parameters (sim::default_bucket_params). Unused at dp = 1.
  std::size_t bucket_elements = kDefaultBucketElements;
  /// ZeRO-1 at dp > 1 (Megatron's --use-distributed-optimizer; the layout's
  /// zero=1 / dist_opt=1): fp32 master weights and Adam moments sharded over
  /// the dp ranks. Ignored at dp = 1.
  bool distributed_optimizer = false;
  /// With the distributed optimizer at dp > 1 (Megatron's
  /// --overlap-param-gather, the layout's overlap_param_gather=1): a step ends
  /// at the update, and the next one all-gathers the bf16 weights bucket by
  /// bucket while its forward runs, each bucket waited for just before the
  /// first task that reads it (engine/model/gradient_bucket_plan.h). Between
  /// steps the gathers are pending: weight(), state(), set_parameter() and
  /// restore() complete them first, so every rank of the dp group must call
  /// them together then. Ignored without the distributed optimizer.
  bool overlap_param_gather = false;
  /// The longest the host waits for a step's collectives (dp, tp > 1): past
  /// it, the group's synchronize throws comm::CommError naming the group, the
  /// rank and the collective, and every communicator of the trainer is
  /// aborted, so no rank hangs on a peer that stopped. NCCL users' 10 minutes
  /// (PyTorch's default process-group timeout).
  std::chrono::milliseconds comm_timeout = std::chrono::minutes(10);
};

struct StepResult {
  int step = 0;  // 1-based
  double loss = 0;       // mean cross entropy over the global batch
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool skipped = false;  // non-finite gradient norm: no update (as Megatron skips)
  double seconds = 0;    // wall time of the step, host to host
  std::vector<TaskTime> tasks;  // when time_tasks
};

class Trainer {
 public:
  /// Builds the one-GPU Plan of this rank's micro-batches, plans and allocates
  /// the arena, initialises the weights from the seed. `shape` must be free of
  /// transformer_shape_problems. `data_parallel`: the rank's dp group (bound to
  /// a stream other than the trainer's, so reductions overlap), or null for
  /// one GPU; it must outlive the trainer, and every rank of it makes its
  /// trainer with the same model, shape and options. Throws
  /// std::invalid_argument when the global batch is not a multiple of
  /// micro_batch x dp, kernels::CudaError when the GPU or its memory is missing.
  /// `tensor_parallel`: the rank's tp group (null: none); `shape` is then the
  /// rank's shard (transformer_shape_of(model, layout)) and the Transformer
  /// runs tensor-parallel (transformer.h), sequence-parallel when the shape
  /// says so; the Plan then holds the tp collectives around each block, which
  /// the trainer runs as tasks. Every tp rank of a group gets the same data.
  Trainer(const sim::ModelConfig& model, const TransformerShape& shape, const TrainerOptions& options,
          comm::Communicator* data_parallel = nullptr, comm::Communicator* tensor_parallel = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// One optimizer step over the global batch: inputs and targets hold
  /// global_batch x seq tokens each (the whole batch on every dp rank).
  StepResult step(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);

  /// Forward and backward of the global batch without the optimizer: the
  /// gradients (summed over the dp group) are left in the buffers
  /// (gradient()) and the mean loss returned.
  double forward_backward(std::span<const std::int32_t> inputs,
                          std::span<const std::int32_t> targets);

  const ParameterLayout& layout() const { return layout_; }
  const TransformerShape& shape() const { return shape_; }
  const ArenaPlan& memory_plan() const { return arena_->plan(); }
  std::size_t arena_bytes() const { return arena_->bytes(); }
  /// Elements of the flat weight and gradient buffers (the layout's, or the dp buckets' padded end).
  std::size_t flat_elements() const { return elements_; }
  int steps_done() const { return steps_done_; }
  /// Ranks of the data-parallel group (1 without one) and this rank's micro-batches per step.
  int data_parallel_size() const { return dp_size_; }
  int local_microbatches() const { return microbatches_; }
  /// The data-parallel buckets (empty at dp = 1).
  const std::vector<GradientBucketRange>& gradient_buckets() const { return buckets_; }
  /// The compute tasks of one step, in the order they run.
  std::size_t tasks_per_step() const { return tasks_.size(); }

  // Access for tests and checkpoints, by tensor name (ParameterLayout).
  /// Sets the fp32 master copy and the bf16 weights (rounded) of one tensor
  /// (with the distributed optimizer, the rank's part of the master copy; it
  /// then uses the tensor's gradient as scratch).
  void set_parameter(const std::string& name, std::span<const float> values);
  /// With the distributed optimizer, NaN where another rank holds the master copy.
  std::vector<float> master_parameter(const std::string& name) const;
  /// The bf16 weights the model computes with, as floats.
  std::vector<float> weight(const std::string& name) const;
  /// With the distributed optimizer, only this rank's blocks hold the group's sum.
  std::vector<float> gradient(const std::string& name) const;

  /// After a step whose gradient norm is not finite (every rank of the
  /// groups calls it then: it all-reduces over them): the name of the first
  /// tensor, in the flat layout's order, whose gradient's sum of squares is
  /// not finite, or "" when none is (engine/model/nonfinite_step.h). One
  /// sum-of-squares kernel per tensor; with the distributed optimizer each
  /// rank checks its reduced blocks. Defined in trainer_nonfinite.cc.
  std::string first_nonfinite_gradient();
  /// Overwrites one tensor's gradient (tests of first_nonfinite_gradient: a
  /// NaN in one place only). Defined in trainer_nonfinite.cc.
  void set_gradient(const std::string& name, std::span<const float> values);

  /// What a checkpoint keeps of this rank (engine/checkpoint/trainer_state.h):
  /// the flat bf16 weights, the fp32 master weights and Adam moments (the
  /// rank's shard with the distributed optimizer) and the updates done. Waits
  /// for the GPU.
  checkpoint::TrainerState state() const;
  /// Puts a state() back: the next step continues as the saved trainer's
  /// would have. Throws std::invalid_argument naming the array whose length
  /// differs from this trainer's (another model or layout).
  void restore(const checkpoint::TrainerState& state);

 private:
  void upload(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  /// Queues the step's tasks; the optimizer (for update number `step`) only
  /// when step > 0. Nothing waits for the GPU.
  void run_tasks(int step);
  void queue_optimizer(int step);
  /// tp > 1: ||g||² over the model into buffers_.norm_scalars[0], every tp rank's
  /// shards counted once and the replicated tensors once (rank 0's).
  void queue_tensor_parallel_sum_squares();
  /// Waits for the work queued on the compute stream; with dp or tp groups
  /// through their synchronize(comm_timeout), every group aborted when one
  /// times out or fails.
  void wait_for_compute_stream();
  /// Waits for the queued work; returns the mean loss and, when `grad_norm`
  /// is not null, the gradient norm the optimizer computed.
  double read_results(double* grad_norm);
  /// run_tasks(0) through the CUDA graph (use_cuda_graph), or directly; then the
  /// optimizer for update `step` when step > 0.
  void queue_step(int step);
  void capture_graph();
  void initialise_parameters();
  void zero_embedding_gradients();
  void tune_gemms();
  /// Completes the bf16 weights' all-gathers overlap_param_gather left
  /// pending (a collective over dp); nothing otherwise.
  void settle_parameter_gathers() const;
  /// tp > 1: one of the Plan's collective tasks around a block (transformer.h).
  void run_tensor_parallel_task(const sim::Task& task);
  /// dp > 1: queues the reductions of the buckets complete after task `index`.
  void reduce_buckets_ready_after(std::size_t index);
  /// dp > 1: the per-token losses of every rank into gathered_losses_, on the
  /// dp stream after the step's work; returns their mean in global micro-batch order.
  double gathered_mean_loss();

  TransformerShape shape_;
  TrainerOptions options_;
  ParameterLayout layout_;
  sim::Plan plan_;
  std::vector<sim::Task> tasks_;  // stage 0's compute-stream tasks, in issue order
  int microbatches_ = 1;  // this rank's per step
  comm::Communicator* dp_ = nullptr;
  comm::Communicator* tp_ = nullptr;  // tp > 1 only
  int dp_size_ = 1;
  int dp_rank_ = 0;
  std::vector<GradientBucketRange> buckets_;
  std::vector<std::vector<int>> buckets_after_task_;  // by task index (dp > 1)
  std::vector<std::vector<int>> gathers_before_task_;  // by task index (overlap_param_gather)
  std::unique_ptr<data_parallel::GradientReducer> reducer_;
  std::unique_ptr<data_parallel::DistributedOptimizer> sharded_;  // distributed optimizer, dp > 1
  std::unique_ptr<tensor_parallel::PartialGradients> partial_gradients_;  // tp > 1 with sp
  std::size_t elements_ = 0;  // of the flat weight and gradient buffers (the buckets' padded end)
  bool reduce_gradients_ = true;  // off for the GEMM-tuning pass
  float* gathered_losses_ = nullptr;  // (global_batch x seq) per-token losses, dp > 1
  CUevent_st* step_done_ = nullptr;   // cudaEvent_t, dp > 1
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<DeviceArena> arena_;
  data_parallel::OptimizerBuffers buffers_;  // weights, gradients, masters, Adam moments, norm scratch
  cudaStream_t stream_ = nullptr;
  CUgraphExec_st* graph_ = nullptr;  // cudaGraphExec_t: the forward and backward, captured
  TaskTimer timer_;
  int steps_done_ = 0;
  std::string task_name_;  // reused buffer
};

}  // namespace sextant::engine
