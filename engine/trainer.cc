#include "engine/trainer.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/comm/communicator.h"
#include "engine/data_parallel/distributed_optimizer.h"
#include "engine/model/decay_pieces.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/tensor_parallel/partial_gradients.h"
#include "engine/trainer_arrays.h"
#include "kernels/adamw.h"
#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"
#include "kernels/parameter_init.h"
#include "sim/plan/plan_builder.h"
#include "sim/plan/task_name.h"

namespace sextant::engine {

namespace {

std::vector<data_parallel::GradientBucket> bucket_ranges(const std::vector<GradientBucketRange>& buckets) {
  std::vector<data_parallel::GradientBucket> ranges;
  for (const GradientBucketRange& b : buckets) ranges.push_back({b.begin, b.elements});
  return ranges;
}

// One replica's layout: its share of the global batch on one GPU, or on its
// tp group (whose collectives around each block are tasks of the Plan).
sim::ParallelLayout single_gpu_layout(const TrainerOptions& o, int dp, const TransformerShape& shape) {
  sim::ParallelLayout l;
  l.tp = shape.tp;
  l.sp = shape.sequence_parallel;
  l.tp_comm_overlap = false;  // the engine runs each collective as its own task
  l.mbs = o.micro_batch;
  l.gbs = o.global_batch / dp;
  l.recompute = o.recompute;
  l.schedule = sim::Schedule::kOneFOneB;
  l.overlap_grad_reduce = false;  // one GPU: no gradient reduction at all
  return l;
}

}  // namespace

Trainer::Trainer(const sim::ModelConfig& model, const TransformerShape& shape,
                 const TrainerOptions& options, comm::Communicator* data_parallel,
                 comm::Communicator* tensor_parallel)
    : shape_(shape), options_(options), layout_(shape), timer_(options.time_tasks) {
  if (tensor_parallel != nullptr && tensor_parallel->size() > 1) tp_ = tensor_parallel;
  if (data_parallel != nullptr && data_parallel->size() > 1) {
    dp_ = data_parallel;
    dp_size_ = dp_->size();
    dp_rank_ = dp_->rank();
  }
  if (options_.micro_batch < 1 || options_.global_batch % (options_.micro_batch * dp_size_) != 0)
    throw std::invalid_argument("Trainer: the global batch (" + std::to_string(options_.global_batch) +
                                ") must be a multiple of the micro-batch (" +
                                std::to_string(options_.micro_batch) + ") times the data-parallel ranks (" +
                                std::to_string(dp_size_) + ")");
  microbatches_ = options_.global_batch / (options_.micro_batch * dp_size_);

  // The Plan of this layout; the engine runs stage 0's compute stream. With one
  // GPU there is nothing else: no collectives, no sends, no buckets.
  sim::ModelConfig plan_model = model;
  plan_model.seq_length = shape_.seq;
  if (shape_.tp != (tp_ != nullptr ? tp_->size() : 1))
    throw std::invalid_argument("Trainer: the shape is a shard of tp = " + std::to_string(shape_.tp) +
                                " ranks but the tensor-parallel group has " +
                                std::to_string(tp_ != nullptr ? tp_->size() : 1));
  plan_ = sim::build_plan(plan_model, single_gpu_layout(options_, dp_size_, shape_));
  for (std::uint32_t i = plan_.stage_begin[0]; i < plan_.stage_begin[1]; ++i) {
    const sim::Task& t = plan_.tasks[i];
    const bool tensor_parallel = t.kind == sim::TaskKind::kTensorParallel ||
                                 t.kind == sim::TaskKind::kTensorParallelGather ||
                                 t.kind == sim::TaskKind::kTensorParallelScatter;
    if (t.kind == sim::TaskKind::kCompute || t.kind == sim::TaskKind::kOptimizerStep || tensor_parallel)
      tasks_.push_back(t);
    else
      throw std::logic_error("Trainer: the single-GPU plan holds a communication task: " +
                             sim::task_name(plan_, t));
  }

  elements_ = layout_.total_elements();
  std::size_t master_elements = elements_;
  if (dp_ != nullptr) {
    // Buckets in buffer order, each reduced after its last backward write; with
    // the distributed optimizer each a multiple of 8·dp (the buffers run to the
    // last bucket's padded end).
    const bool sharded = options_.distributed_optimizer;
    buckets_ = plan_gradient_buckets(layout_, tasks_, options_.bucket_elements,
                                     sharded ? data_parallel::DistributedOptimizer::bucket_multiple(dp_size_) : 1);
    buckets_after_task_.resize(tasks_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      buckets_after_task_[buckets_[b].ready_after].push_back(static_cast<int>(b));
    elements_ = buckets_.back().begin + buckets_.back().elements;
    if (sharded) {
      sharded_ = std::make_unique<data_parallel::DistributedOptimizer>(*dp_, bucket_ranges(buckets_),
                                                                      layout_.decayed_ranges());
      master_elements = sharded_->shard_elements();
      if (options_.overlap_param_gather) {
        sharded_->defer_gathers(true);
        gathers_before_task_ = first_parameter_reads(layout_, tasks_, buckets_);
        std::vector<int> order;  // gathered in the order the forward reads them
        for (const std::vector<int>& bs : gathers_before_task_) order.insert(order.end(), bs.begin(), bs.end());
        sharded_->gather_in_order(std::move(order));
      }
      if (tp_ != nullptr) {
        // Beside tp: this rank's shards, and the replicated tensors on tp rank 0
        // only (queue_tensor_parallel_sum_squares' rule), count in the norm.
        std::vector<ElementRange> counted;
        for (const ParameterTensor& t : layout_.tensors())
          if (t.split_over_tp || tp_->rank() == 0) counted.emplace_back(t.offset, t.offset + t.elements());
        sharded_->count_in_norm(std::move(counted), {tp_});
      }
    }
  }

  SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ArenaPlan memory;
  const OptimizerSlots optimizer = plan_optimizer_buffers(memory, elements_, master_elements, sharded_ ? dp_size_ : 1);
  model_ = std::make_unique<Transformer>(shape_, options_.recompute, microbatches_, memory);
  ArenaPlan::Slot gathered = -1;
  if (dp_ != nullptr)
    gathered = memory.add("per-token losses of the dp group (fp32)", MemoryCategory::kOther,
                          static_cast<std::size_t>(options_.global_batch) * shape_.seq * sizeof(float));

  arena_ = std::make_unique<DeviceArena>(memory);
  buffers_ = bind_optimizer_buffers(*arena_, optimizer);
  if (dp_ != nullptr) gathered_losses_ = arena_->get<float>(gathered);
  model_->bind(*arena_, layout_, ParameterBuffers{buffers_.weights, buffers_.gradients}, stream_, tp_);
  initialise_parameters();
  // Parameter gradients are written by the first micro-batch's backward and
  // added by the others (transformer.h): the Plan must run micro-batch 0's
  // backward tasks before any other's.
  for (const sim::Task& t : tasks_) {
    if (t.pass != sim::Pass::kBackward) continue;
    if (t.microbatch != 0)
      throw std::logic_error("Trainer: the plan's first backward task is not micro-batch 0's: " +
                             sim::task_name(plan_, t));
    break;
  }
  // The optimizer runs after the graph of the forward and backward (queue_step).
  if (tasks_.empty() || tasks_.back().kind != sim::TaskKind::kOptimizerStep)
    throw std::logic_error("Trainer: the plan's last task is not the optimizer step");
  if (dp_ != nullptr || tp_ != nullptr)
    SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming));
  if (tp_ != nullptr && shape_.sequence_parallel)
    partial_gradients_ = std::make_unique<tensor_parallel::PartialGradients>(layout_);
  if (dp_ != nullptr) {
    const auto reduction = sharded_ ? data_parallel::Reduction::kReduceScatter : data_parallel::Reduction::kAllReduce;
    reducer_ =
        std::make_unique<data_parallel::GradientReducer>(*dp_, buffers_.gradients, bucket_ranges(buckets_), reduction);
  }
  // Not under tp: every tp rank computes the replicated tensors' gradients (the
  // output layer's among them) and relies on computing them alike, so the ranks
  // keep cuBLASLt's heuristic choice, which depends on the shapes only, instead
  // of each timing its own.
  if (options_.tune_gemms && tp_ == nullptr) tune_gemms();
}

void Trainer::queue_step(int step) {
  // dp or tp > 1: the collectives meet the other ranks from the host (the
  // in-process communicator) or join NCCL's queue; launched one by one for now.
  if (!options_.use_cuda_graph || timer_.enabled() || dp_ != nullptr || tp_ != nullptr) {
    run_tasks(step);
    return;
  }
  if (graph_ == nullptr) capture_graph();
  SEXTANT_CUDA_CHECK(cudaGraphLaunch(graph_, stream_));
  if (step > 0) queue_optimizer(step);
}

void Trainer::capture_graph() {
  // Everything run_tasks queues is device work on stream_ with fixed pointers and
  // sizes (tokens are uploaded into the same buffers each step), so one capture
  // replays every step. The optimizer stays outside: its learning rate and bias
  // corrections change per step.
  cudaGraph_t graph = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    run_tasks(0);
  } catch (...) {
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  SEXTANT_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  SEXTANT_CUDA_CHECK(instantiated);
  graph_ = exec;
}

void Trainer::tune_gemms() {
  // Tokens spread over the vocabulary (a 64-bit LCG, Knuth's MMIX constants)
  // rather than one token everywhere, so the products are timed on data like
  // training's (a tensor core's power, and so the clock it holds, depends on
  // the data). Everything this pass writes is overwritten or zeroed by the
  // first step.
  const std::size_t n = static_cast<std::size_t>(options_.global_batch) * shape_.seq;
  std::vector<std::int32_t> tokens(n);
  std::uint64_t state = options_.seed;
  for (auto& t : tokens) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(shape_.vocab));
  }
  upload(tokens, tokens);
  model_->set_tune_gemms(true);
  reduce_gradients_ = false;  // the ranks time different products: no dp collectives
  run_tasks(0);
  reduce_gradients_ = true;
  model_->set_tune_gemms(false);
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  timer_.collect();  // the pass's task times are not a step's
}

void Trainer::zero_embedding_gradients() {
  // Scatter-added (kernels/embedding.h): rows of tokens a step lacks are never
  // written, so these two start from zero each step. A tied wte is written
  // first by the LM head's weight-gradient GEMM instead.
  for (const int tensor : {layout_.wpe(), shape_.tie_embeddings ? LayerTensors::kAbsent : layout_.wte()}) {
    if (tensor == LayerTensors::kAbsent) continue;
    const ParameterTensor& t = layout_.tensors()[static_cast<std::size_t>(tensor)];
    SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.gradients + t.offset, 0, t.elements() * sizeof(float), stream_));
  }
}

Trainer::~Trainer() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (dp_ != nullptr) cudaStreamSynchronize(dp_->stream());
  if (tp_ != nullptr) cudaStreamSynchronize(tp_->stream());
  reducer_.reset();
  sharded_.reset();
  if (step_done_ != nullptr) cudaEventDestroy(step_done_);
  if (graph_ != nullptr) cudaGraphExecDestroy(graph_);
  if (stream_ != nullptr) {
    model_.reset();
    cudaStreamDestroy(stream_);
  }
}

void Trainer::initialise_parameters() {
  const std::size_t n = elements_;
  // The whole fp32 model: the master copy, or with a sharded one the gradient
  // buffer as scratch, whose blocks the shard then takes.
  float* full = sharded_ ? buffers_.gradients : buffers_.master;
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(full, 0, n * sizeof(float), stream_));  // padding too
  const std::size_t tensors = layout_.tensors().size();
  for (std::size_t i = 0; i < tensors; ++i) {
    const ParameterTensor& t = layout_.tensors()[i];
    float* out = full + t.offset;
    // Random streams by tensor; a tp rank's shard draws from a stream of its own
    // (else the shards would start, and stay, equal). Replicated tensors, and
    // one GPU, use the tensor's own.
    const std::size_t stream_id =
        t.split_over_tp && tp_ != nullptr ? i + tensors * static_cast<std::size_t>(tp_->rank()) : i;
    draw_initial_values(out, t, stream_id, options_, shape_.num_layers, stream_);  // kZeros: zeroed above
  }
  kernels::convert_to_bf16(buffers_.weights, full, n, stream_);
  const std::size_t master_elements = sharded_ ? sharded_->shard_elements() : n;
  if (sharded_) sharded_->copy_to_shard(full, 0, n, buffers_.master, stream_);
  // Once: the padding between tensors is never written and the norm reads it.
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.gradients, 0, n * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.adam_m, 0, master_elements * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.adam_v, 0, master_elements * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Trainer::upload(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  const std::size_t expected = static_cast<std::size_t>(options_.global_batch) * shape_.seq;
  if (inputs.size() != expected || targets.size() != expected)
    throw std::invalid_argument("Trainer: a step takes global_batch x seq = " +
                                std::to_string(expected) + " inputs and targets");
  // Pageable copies: cudaMemcpyAsync stages them, and they are a few hundred KiB.
  if (dp_ == nullptr) {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(model_->tokens(), inputs.data(), expected * sizeof(std::int32_t),
                                       cudaMemcpyHostToDevice, stream_));
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(model_->targets(), targets.data(),
                                       expected * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    return;
  }
  // Local micro-batch i is global micro-batch dp_rank + i·dp.
  const std::size_t per_mb = static_cast<std::size_t>(shape_.tokens());
  for (int i = 0; i < microbatches_; ++i) {
    const std::size_t from = static_cast<std::size_t>(dp_rank_ + i * dp_size_) * per_mb;
    const std::size_t to = static_cast<std::size_t>(i) * per_mb;
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(model_->tokens() + to, inputs.data() + from,
                                       per_mb * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(model_->targets() + to, targets.data() + from,
                                       per_mb * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  }
}

void Trainer::run_tasks(int step) {
  // overlap_param_gather: the last update's weights gathered while this forward runs.
  if (sharded_ && sharded_->gather_pending()) sharded_->queue_gathers(buffers_.weights, stream_);
  zero_embedding_gradients();
  const float loss_scale = 1.0f / static_cast<float>(static_cast<double>(options_.global_batch) * shape_.seq);
  for (std::size_t k = 0; k < tasks_.size(); ++k) {
    const sim::Task& t = tasks_[k];
    if (!gathers_before_task_.empty())
      for (const int b : gathers_before_task_[k]) sharded_->wait_for_gather(static_cast<std::size_t>(b), stream_);
    if (timer_.enabled()) {
      task_name_.clear();
      sim::append_task_name(plan_, t, task_name_);
      timer_.begin(task_name_, stream_);
    }
    if (t.kind == sim::TaskKind::kOptimizerStep) {
      // Sequence parallelism's partial gradients summed over tp (with dp, bucket by bucket below).
      if (partial_gradients_ != nullptr && dp_ == nullptr)
        partial_gradients_->sum(buffers_.gradients, 0, elements_, *tp_, stream_);
      if (reducer_ != nullptr && reduce_gradients_) reducer_->finish(stream_);
      if (step > 0) queue_optimizer(step);
      continue;
    }
    const bool recompute = t.pass == sim::Pass::kRecompute;
    const bool forward = t.pass == sim::Pass::kForward || recompute;
    model_->set_accumulate_gradients(t.microbatch > 0);
    if (t.kind != sim::TaskKind::kCompute) {  // tensor parallelism's collectives around a block
      run_tensor_parallel_task(t);
      if (reducer_ != nullptr && reduce_gradients_) reduce_buckets_ready_after(k);
      continue;
    }
    switch (t.block) {
      case sim::Block::kEmbedding:
        forward ? model_->embedding_forward(t.microbatch) : model_->embedding_backward(t.microbatch);
        break;
      case sim::Block::kAttention:
        forward ? model_->attention_forward(t.layer, recompute) : model_->attention_backward(t.layer);
        break;
      case sim::Block::kMlp:
        forward ? model_->mlp_forward(t.layer, recompute) : model_->mlp_backward(t.layer);
        break;
      case sim::Block::kOutput:
        forward ? model_->output_forward(t.microbatch, loss_scale) : model_->output_backward();
        break;
      case sim::Block::kAttentionCore:
      case sim::Block::kSharedExpertFc1:
      case sim::Block::kSharedExpertFc2:
      case sim::Block::kNone:
        throw std::logic_error("Trainer: the plan holds a task the engine does not run: " +
                               sim::task_name(plan_, t));
    }
    if (reducer_ != nullptr && reduce_gradients_) reduce_buckets_ready_after(k);
  }
  timer_.end(stream_);
}

void Trainer::queue_optimizer(int step) {
  kernels::AdamWStep s = adamw_step(options_, step);
  if (sharded_) {
    sharded_->queue_step(buffers_, s, static_cast<float>(options_.optimizer.grad_clip), stream_);
    return;
  }
  // Global gradient norm and clip factor, all on the device; a non-finite norm
  // makes the clip factor NaN and AdamW skip the update (kernels/grad_norm.h),
  // so the step never waits for the host.
  float* sum_squares = buffers_.norm_scalars;
  float* norm = buffers_.norm_scalars + 1;
  float* scale = buffers_.norm_scalars + 2;
  if (tp_ != nullptr) {
    queue_tensor_parallel_sum_squares();
  } else {
    SEXTANT_CUDA_CHECK(cudaMemsetAsync(sum_squares, 0, sizeof(float), stream_));
    kernels::grad_sum_squares_accumulate(sum_squares, buffers_.gradients, layout_.total_elements(),
                                         buffers_.norm_workspace, buffers_.norm_workspace_bytes, stream_);
  }
  kernels::grad_clip_scale(norm, scale, sum_squares, static_cast<float>(options_.optimizer.grad_clip),
                           stream_);
  const float weight_decay = s.weight_decay;
  for_each_decay_piece(0, layout_.total_elements(), layout_.decayed_ranges(),
                       [&](std::size_t from, std::size_t to, bool decayed) {
                         s.weight_decay = decayed ? weight_decay : 0.0f;
                         kernels::adamw_update(buffers_.master + from, buffers_.weights + from, buffers_.adam_m + from,
                                               buffers_.adam_v + from, buffers_.gradients + from, to - from, s, scale,
                                               stream_);
                       });
}

void Trainer::run_tensor_parallel_task(const sim::Task& t) {
  const bool recompute = t.pass == sim::Pass::kRecompute;
  const bool backward = !(t.pass == sim::Pass::kForward || recompute);
  if (t.block != sim::Block::kAttention && t.block != sim::Block::kMlp)
    throw std::logic_error("Trainer: a tensor-parallel task of no layer block: " + sim::task_name(plan_, t));
  model_->tp_task(t.kind, t.block == sim::Block::kAttention ? Transformer::Part::kAttention : Transformer::Part::kMlp,
                  t.layer, backward, recompute);
}

void Trainer::reduce_buckets_ready_after(std::size_t index) {
  for (const int b : buckets_after_task_[index]) {
    const GradientBucketRange& r = buckets_[static_cast<std::size_t>(b)];
    if (partial_gradients_ != nullptr)
      partial_gradients_->sum(buffers_.gradients, r.begin, r.begin + r.elements, *tp_, stream_);
    reducer_->bucket_ready(b, stream_);
  }
}

double Trainer::gathered_mean_loss() {
  const std::size_t local = static_cast<std::size_t>(microbatches_) * static_cast<std::size_t>(shape_.tokens());
  SEXTANT_CUDA_CHECK(cudaEventRecord(step_done_, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(dp_->stream(), step_done_, 0));
  dp_->all_gather(model_->losses(), gathered_losses_, local, comm::DataType::kFp32);
  std::vector<float> losses(local * static_cast<std::size_t>(dp_size_));
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(losses.data(), gathered_losses_, losses.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, dp_->stream()));
  wait_for_compute_stream();  // the dp stream's gather included
  // Summed in global micro-batch order, the mean is the one a single rank computes.
  return mean_loss_in_global_order(losses, microbatches_, dp_size_, static_cast<std::size_t>(shape_.tokens()));
}

void Trainer::queue_tensor_parallel_sum_squares() {
  // Rank 0 adds its shards and the replicated tensors, the others their shards;
  // the sum over the tp group is then the whole model's (Megatron's
  // clip_grad_norm counts a replicated parameter on one tp rank only).
  float* sum_squares = buffers_.norm_scalars;
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(sum_squares, 0, sizeof(float), stream_));
  const bool replicated_here = tp_->rank() == 0;
  for (const ParameterTensor& t : layout_.tensors())
    if (t.split_over_tp || replicated_here)
      kernels::grad_sum_squares_accumulate(sum_squares, buffers_.gradients + t.offset, t.elements(),
                                           buffers_.norm_workspace, buffers_.norm_workspace_bytes, stream_);
  SEXTANT_CUDA_CHECK(cudaEventRecord(step_done_, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(tp_->stream(), step_done_, 0));
  tp_->all_reduce_sum(sum_squares, sum_squares, 1, comm::DataType::kFp32);
  SEXTANT_CUDA_CHECK(cudaEventRecord(step_done_, tp_->stream()));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, step_done_, 0));
}

void Trainer::wait_for_compute_stream() {
  if (dp_ == nullptr && tp_ == nullptr) {
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  // tp first: its collectives sit inside the forward and backward, so a hung
  // one is named there rather than as the dp group's wait behind it. Each
  // group's stream waits for the compute stream, so once both are done, so is it.
  try {
    for (comm::Communicator* group : {tp_, dp_}) {
      if (group == nullptr) continue;
      SEXTANT_CUDA_CHECK(cudaEventRecord(step_done_, stream_));
      SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(group->stream(), step_done_, 0));
      group->synchronize(options_.comm_timeout);
    }
  } catch (...) {
    // Peers may be stuck in the other group's collectives, and this rank's
    // streams behind them: aborting both lets the streams, and the
    // destructors, finish.
    for (comm::Communicator* group : {tp_, dp_})
      if (group != nullptr) group->abort();
    throw;
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

double Trainer::read_results(double* grad_norm) {
  if (dp_ != nullptr) {
    float norm = 0;
    if (grad_norm != nullptr)
      SEXTANT_CUDA_CHECK(
          cudaMemcpyAsync(&norm, buffers_.norm_scalars + 1, sizeof(float), cudaMemcpyDeviceToHost, stream_));
    const double loss = gathered_mean_loss();
    if (grad_norm != nullptr) *grad_norm = norm;
    return loss;
  }
  const std::size_t n = static_cast<std::size_t>(options_.global_batch) * shape_.seq;
  std::vector<float> losses(n);
  float norm = 0;
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(losses.data(), model_->losses(), n * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream_));
  if (grad_norm != nullptr)
    SEXTANT_CUDA_CHECK(
        cudaMemcpyAsync(&norm, buffers_.norm_scalars + 1, sizeof(float), cudaMemcpyDeviceToHost, stream_));
  wait_for_compute_stream();
  if (grad_norm != nullptr) *grad_norm = norm;
  double sum = 0;
  for (float l : losses) sum += l;
  return sum / static_cast<double>(n);
}

StepResult Trainer::step(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.step = steps_done_ + 1;
  result.lr = options_.lr.at(result.step);
  upload(inputs, targets);
  queue_step(result.step);
  result.loss = read_results(&result.grad_norm);
  // A non-finite norm: AdamW skipped the update on the device (Megatron's
  // behaviour with a loss scaler, and the only safe one with bf16).
  result.skipped = !std::isfinite(result.grad_norm);
  result.tasks = timer_.collect();
  if (!result.skipped) ++steps_done_;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

double Trainer::forward_backward(std::span<const std::int32_t> inputs,
                                 std::span<const std::int32_t> targets) {
  upload(inputs, targets);
  queue_step(0);
  const double loss = read_results(nullptr);
  timer_.collect();
  return loss;
}

void Trainer::set_parameter(const std::string& name, std::span<const float> values) {
  const ParameterTensor& t = layout_.find(name);
  if (values.size() != t.elements())
    throw std::invalid_argument("set_parameter(" + name + "): " + std::to_string(values.size()) +
                                " values for " + std::to_string(t.elements()) + " elements");
  settle_parameter_gathers();
  float* full = sharded_ ? buffers_.gradients : buffers_.master;  // the tensor's whole fp32 values
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(full + t.offset, values.data(), values.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream_));
  kernels::convert_to_bf16(buffers_.weights + t.offset, full + t.offset, t.elements(), stream_);
  if (sharded_) sharded_->copy_to_shard(full, t.offset, t.elements(), buffers_.master, stream_);
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::vector<float> Trainer::master_parameter(const std::string& name) const {
  const ParameterTensor& t = layout_.find(name);
  if (!sharded_) return download_floats(buffers_.master + t.offset, t.elements(), stream_);
  return sharded_->values_from_shard(buffers_.master, t.offset, t.elements(), stream_);
}

void Trainer::settle_parameter_gathers() const {
  if (sharded_) sharded_->settle_gathers(buffers_.weights, stream_);
}

std::vector<float> Trainer::weight(const std::string& name) const {
  const ParameterTensor& t = layout_.find(name);
  settle_parameter_gathers();
  return download_bf16_as_floats(buffers_.weights + t.offset, t.elements(), stream_);
}

std::vector<float> Trainer::gradient(const std::string& name) const {
  const ParameterTensor& t = layout_.find(name);
  return download_floats(buffers_.gradients + t.offset, t.elements(), stream_);
}

checkpoint::TrainerState Trainer::state() const {
  settle_parameter_gathers();
  return read_trainer_state(buffers_, steps_done_, stream_);
}

void Trainer::restore(const checkpoint::TrainerState& s) {
  settle_parameter_gathers();  // before the weights are overwritten
  write_trainer_state(buffers_, s, "Trainer::restore", stream_);
  steps_done_ = static_cast<int>(s.steps_done);
}

}  // namespace sextant::engine
