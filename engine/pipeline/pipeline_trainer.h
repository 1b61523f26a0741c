// Training one pipeline rank: its stage's model chunks, its part of the
// Plan's schedule (1F1B, or interleaved 1F1B with vpp > 1 chunks per rank:
// Narayanan et al. 2021, Sec. 2.2), the activations of the micro-batches in
// flight, and the transfers with the neighbouring stages.
//
// Each rank runs stage_program_of(plan, its stage) (stage_program.h): the
// Plan's compute and send tasks in the Plan's order under the Plan's names
// (so the task timer and `run --compare` read them as the simulator's), with
// the receives the Plan leaves implicit. The stage keeps as many activation
// slots as it has chunk-micro-batches in flight at the schedule's peak (1F1B:
// min(pp − s, m) on stage s; interleaving: stage_program.h). A slot is one
// ArenaPlan overlay that serves every chunk in turn: a model chunk is one
// Transformer per slot, all of them on the chunk's weights and gradients, each
// laying one micro-batch's stored activations over its slot's memory. The
// buffers a pass uses and leaves (activation gradients, workspaces) and the
// step's tokens, targets and losses are one set for the whole stage
// (transformer.h), as the simulator counts them; the logits (T, vocab) exist
// on the output's chunk only.
//
// Transfers: forward activations and backward input gradients, bf16
// (mbs·seq, hidden), through the pp communicator's exchange (grouped
// send/recv) on its stream, grouped as Megatron's schedules group them
// (stage_program.h). The compute stream hands the buffers over with an event
// and waits for the exchange before it goes on (Megatron's blocking batched
// p2p), so a slot's buffers are never overwritten while a transfer reads or
// writes them.
//
// Data parallelism: the stage's gradients are reduced over the dp group in the
// Plan's buckets (sim/plan/gradient_buckets.h: the first stage's first chunk
// cut by size, every other chunk one bucket), each queued on the dp stream as
// soon as the action writing the last of its gradients has run, so the first
// stage's reductions overlap its remaining backward as Megatron's do. The
// step's end, on every rank: with tied embeddings the first stage's wte
// gradient (the embedding's) and the last stage's (the output layer's, on its
// own copy of wte) all-reduced between the two (Megatron's embedding group),
// so both copies get the same update, and then the buckets holding them; the
// gradient norm for clipping over the whole model (each rank's sum of squares,
// a replicated tensor counted on tp rank 0 and the tied copy once, all-reduced
// over tp and pp); AdamW. The loss: the last stage's per-token losses
// (gathered over dp), all-reduced over pp with zeros from the other stages —
// exact, so every rank reports the same mean, summed in the order one GPU would.
//
// Initial weights: each tensor from the random stream of its index in the
// whole model's layout (a tp shard from its rank's, as the Trainer does), so a
// pipeline starts from the weights one GPU would draw and the two copies of a
// tied wte are equal.
//
// With tp and sp (Korthikanti et al. 2022) the stages exchange the residual
// stream's sequence shards, (mbs·seq/tp, hidden), and the norms' and
// row-parallel biases' partial gradients are summed over tp after the schedule.
//
// With the distributed optimizer (zero=1 and dp > 1; Rajbhandari et al. 2020,
// Sec. 5.1) the stage's parameters are one bucket, padded to a multiple of
// 8·dp: the gradients are reduce-scattered over dp, each dp rank keeps the
// fp32 masters and Adam moments of its block only and updates them, and the
// bf16 weights are all-gathered (data_parallel/distributed_optimizer.h). The
// tied embedding's two copies are summed before the reduce-scatter, so both
// blocks of wte see the same gradient; the norm counts what the plain path
// counts (norm_ranges()), summed over dp, tp and pp. With overlap_param_gather
// the all-gather runs at the next step's start, while the stage uploads or
// waits for its first input, and the first compute task waits for it.
//
// Not here (refused with std::invalid_argument): cp, ep, zero-bubble
// schedules. Launched kernel by kernel (no
// CUDA graph: the transfers meet other ranks) with cuBLASLt's heuristic
// algorithms (tune_gemms is ignored, as under tp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/trainer_state.h"
#include "engine/comm/communicator.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/data_parallel/optimizer_buffers.h"
#include "engine/device_arena.h"
#include "engine/model/gradient_bucket_plan.h"
#include "engine/model/parameter_layout.h"
#include "engine/model/transformer_shape.h"
#include "engine/pipeline/stage_program.h"
#include "engine/tensor_parallel/partial_gradients.h"
#include "engine/task_timer.h"
#include "engine/trainer.h"
#include "engine/transformer.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/plan/plan.h"

struct CUevent_st;

namespace sextant::engine {
namespace data_parallel {
class DistributedOptimizer;
}
}  // namespace sextant::engine

namespace sextant::engine::pipeline {

/// This rank's groups (engine/comm/parallel_groups.h); they must outlive the trainer.
struct PipelineGroups {
  comm::Communicator* pipeline = nullptr;         // layout.pp ranks; required
  comm::Communicator* data_parallel = nullptr;    // null or one rank: no dp
  comm::Communicator* tensor_parallel = nullptr;  // null or one rank: no tp
};

class PipelineTrainer {
 public:
  /// `layout`: pp > 1 (vpp > 1 with the interleaved schedule), tp, dp, mbs,
  /// gbs, recompute and the split knobs are read; the groups' sizes must be
  /// its pp, dp and tp. Every rank of the world makes its trainer with the
  /// same model, layout and options. Throws std::invalid_argument for what is
  /// not supported or inconsistent, kernels::CudaError for a missing GPU or memory.
  PipelineTrainer(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                  const TrainerOptions& options, const PipelineGroups& groups);
  ~PipelineTrainer();
  PipelineTrainer(const PipelineTrainer&) = delete;
  PipelineTrainer& operator=(const PipelineTrainer&) = delete;

  /// One optimizer step over the global batch (global_batch x seq tokens, the
  /// whole batch on every rank); loss and gradient norm are the whole model's.
  StepResult step(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  /// Forward and backward without the optimizer: the gradients (summed over dp,
  /// tied copies summed) stay in the buffers; returns the mean loss.
  double forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);

  int stage() const { return stage_; }
  /// The tensors this rank holds, by the whole model's names ("layers.5.qkv_weight").
  std::vector<std::string> tensor_names() const;
  std::int64_t parameter_count() const;
  const ArenaPlan& memory_plan() const { return arena_->plan(); }
  std::size_t arena_bytes() const { return arena_->bytes(); }
  int steps_done() const { return steps_done_; }
  int local_microbatches() const { return microbatches_; }
  std::size_t tasks_per_step() const { return program_.actions.size(); }
  const StageProgram& program() const { return program_; }
  const sim::Plan& plan() const { return plan_; }
  /// dp > 1: the stage's gradient buckets (engine/model/gradient_bucket_plan.h), in buffer order.
  const std::vector<GradientBucketRange>& gradient_buckets() const { return buckets_; }

  // By the whole model's names, of tensors this rank holds (std::out_of_range otherwise).
  void set_parameter(const std::string& name, std::span<const float> values);
  std::vector<float> master_parameter(const std::string& name) const;
  std::vector<float> weight(const std::string& name) const;
  std::vector<float> gradient(const std::string& name) const;
  /// Overwrites this rank's gradient of one tensor (tests: a NaN where a step would make one).
  void set_gradient(const std::string& name, std::span<const float> values);

  /// After a step whose gradient norm is not finite (every rank of the world
  /// calls it then: it reduces over tp and dp and gathers over pp): the name of
  /// the first tensor, in the whole model's order, whose gradient is not
  /// finite; "" when none is (pipeline_nonfinite.cc).
  std::string first_nonfinite_gradient();

  /// This rank's flat arrays, as Trainer::state() (the fp32 ones this dp
  /// rank's ZeRO-1 block with the distributed optimizer: checkpoint_sharding.h).
  checkpoint::TrainerState state() const;
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
    /// sums over this rank's tokens, summed over tp after the schedule.
    std::unique_ptr<tensor_parallel::PartialGradients> partial_gradients;
  };
  struct Located {
    const Chunk* chunk;
    const ParameterTensor* tensor;
  };
  Located find(const std::string& name) const;

  void upload(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  void run_step(int step);
  void run_compute(const StageAction& action, float loss_scale);
  void exchange(const StageAction& action);
  // pipeline_reductions.cc
  /// After the schedule: the tied embedding's sum, the buckets waiting for it, and the dp reductions' end.
  void finish_gradients();
  /// dp > 1: buckets_ as the Plan makes them, and when each is reduced.
  void plan_gradient_buckets_of_stage();
  std::vector<data_parallel::GradientBucket> bucket_ranges() const;
  /// sp: the partial gradients in [begin, end) of the flat buffers summed over tp.
  void sum_partial_gradients(std::size_t begin, std::size_t end);
  /// sp sums, then bucket `b`'s dp reduction queued.
  void reduce_bucket(int b);
  void queue_optimizer(int step);
  double read_results(double* grad_norm);
  void zero_embedding_gradients();
  void initialise_parameters(const sim::ModelConfig& model);
  /// Runs `op` (a collective on `group`) ordered after the compute stream's
  /// work so far, and the compute stream's later work after it.
  void on_group(comm::Communicator& group, const std::function<void()>& op);
  bool is_tied_copy(const Chunk& chunk, int tensor) const;
  /// The bf16 weights' gathers overlap_param_gather left pending (Trainer's).
  void settle_parameter_gathers() const;
  /// The ranges of the flat buffers whose gradients count in this rank's part
  /// of the norm: every tensor but a replicated one off tp rank 0 and the tied copy.
  std::vector<ElementRange> norm_ranges() const;

  TransformerShape shape_;  // the rank's tp shard, every layer
  TrainerOptions options_;
  sim::Plan plan_;
  StageProgram program_;
  int stage_ = 0;
  int microbatches_ = 1;
  comm::Communicator* pp_ = nullptr;
  comm::Communicator* dp_ = nullptr;  // dp > 1 only
  comm::Communicator* tp_ = nullptr;  // tp > 1 only
  std::unique_ptr<comm::Communicator> embedding_group_;  // tied: the first and last stage
  std::unique_ptr<data_parallel::GradientReducer> reducer_;
  std::vector<GradientBucketRange> buckets_;  // dp > 1; ready_after: an action index, or none (after the schedule)
  std::vector<std::vector<int>> buckets_after_action_;
  std::vector<int> after_schedule_;  // the buckets holding a tied embedding copy
  std::unique_ptr<data_parallel::DistributedOptimizer> sharded_;  // zero=1, dp > 1
  std::vector<Chunk> chunks_;
  std::size_t elements_ = 0;         // the chunks' parameters
  std::size_t buffer_elements_ = 0;  // the flat buffers: elements_, padded with zeros for the sharded optimizer
  std::size_t master_elements_ = 0;  // buffer_elements_, or this rank's shard
  std::vector<ElementRange> decayed_;  // the chunks' decayed ranges, in the flat buffers
  std::unique_ptr<DeviceArena> arena_;
  data_parallel::OptimizerBuffers buffers_;  // weights, gradients, masters, Adam moments, norm scratch
  float* losses_ = nullptr;           // (local micro-batches x tokens): the last stage's, else zeros
  float* gathered_losses_ = nullptr;  // (global batch x seq), dp > 1
  cudaStream_t stream_ = nullptr;
  CUevent_st* to_comm_ = nullptr;    // cudaEvent_t: compute -> a communicator's stream
  CUevent_st* from_comm_ = nullptr;  // and back
  TaskTimer timer_;
  int steps_done_ = 0;
  std::string task_name_;
  std::vector<comm::PeerTransfer> sends_, receives_;  // reused by exchange()
};

}  // namespace sextant::engine::pipeline
