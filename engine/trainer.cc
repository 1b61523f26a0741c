// The trainer's construction, its step, and the program it runs (trainer.h).
#include "engine/trainer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "engine/data_parallel/distributed_optimizer.h"
#include "engine/data_parallel/gradient_reducer.h"
#include "engine/tensor_parallel/partial_gradients.h"
#include "engine/trainer_arrays.h"
#include "kernels/cuda_check.h"
#include "kernels/parameter_init.h"
#include "sim/plan/plan_builder.h"
#include "sim/plan/task_name.h"

namespace sextant::engine {

namespace {

using pipeline::Direction;
using pipeline::Transfer;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("Trainer: " + what);
}

// One dp replica's pipeline as the Plan knows it: the engine reduces dp in
// its own buckets (trainer_gradients.cc), so the Plan holds the stage's
// compute, its tensor-parallel collectives (tasks of their own, run by the
// Transformer) and the pipeline sends. With cp > 1 it is built on the local
// sequence (the model's seq_length is the caller's S/cp) with cp = 1: the
// context-parallel core exchanges K/V inside the attention task, so the Plan
// must hold no cp task that the stage program cannot run.
sim::ParallelLayout plan_layout(const sim::ParallelLayout& layout) {
  sim::ParallelLayout l = layout;
  l.cp = l.ep = l.etp = l.dp = 1;
  l.zero = 0;
  l.gbs = layout.gbs / layout.dp;
  l.overlap_grad_reduce = false;
  l.overlap_param_gather = false;
  l.tp_comm_overlap = false;  // the engine runs each collective as its own task
  return l;
}

void require_group_size(const comm::ParallelGroups& groups, sim::ParallelGroup kind, int expected) {
  require(groups.size(kind) == expected, "the " + std::string(sim::to_string(kind)) + " group has " +
                                             std::to_string(groups.size(kind)) + " ranks; the layout's " +
                                             std::string(sim::to_string(kind)) + " is " + std::to_string(expected));
}

}  // namespace

Trainer::Trainer(const sim::ModelConfig& model, const sim::ParallelLayout& layout, const TrainerOptions& options,
                 const comm::ParallelGroups& groups)
    : layout_(layout), shape_(transformer_shape_of(model, layout)), options_(options), timer_(options.time_tasks) {
  if (layout.cp > 1) {
    require(!model.moe.has_value(), "cp=" + std::to_string(layout.cp) + " with the MoE model " + model.name +
                                        ": context parallelism of MoE models is not executed yet");
    require(layout.ep == 1, "cp=" + std::to_string(layout.cp) + " with ep=" + std::to_string(layout.ep) +
                                ": context parallelism with expert parallelism is not executed yet");
  }
  if (layout.ep > 1) {
    require(model.moe.has_value(), "ep=" + std::to_string(layout.ep) + " splits the experts of MoE layers; model " +
                                       model.name + " has none (use ep=1)");
    require(layout.etp == 1, "etp=" + std::to_string(layout.etp) +
                                 ": the engine runs each expert on one GPU (etp=1) so far");
  }
  if (options.moe.expert_bias_update_rate != 0.0) {
    const std::string what = "moe.expert_bias_update_rate (" + std::to_string(options.moe.expert_bias_update_rate) + ")";
    require(std::isfinite(options.moe.expert_bias_update_rate) && options.moe.expert_bias_update_rate > 0,
            what + " must be > 0 (0 turns DeepSeek-V3's expert bias off)");
    require(model.moe.has_value(), what + ": model " + model.name + " has no MoE layers to balance");
    require(options.moe.score_function == kernels::MoeScoreFunction::kSigmoid,
            what + ": DeepSeek-V3's expert bias needs the sigmoid router (score_function sigmoid); "
                   "the softmax router takes no bias");
  }
  require(layout.zero <= 1, "zero=" + std::to_string(layout.zero) +
                                ": the engine runs no ZeRO stage beyond the distributed optimizer (zero=1)");
  require(layout.mbs >= 1 && layout.gbs % (layout.mbs * layout.dp) == 0,
          "the global batch (" + std::to_string(layout.gbs) + ") must be a multiple of mbs (" +
              std::to_string(layout.mbs) + ") times dp (" + std::to_string(layout.dp) + ")");
  require_group_size(groups, sim::ParallelGroup::kTp, layout.tp);
  require_group_size(groups, sim::ParallelGroup::kDp, layout.dp);
  require_group_size(groups, sim::ParallelGroup::kCp, layout.cp);
  require_group_size(groups, sim::ParallelGroup::kPp, layout.pp);
  require_group_size(groups, sim::ParallelGroup::kEp, layout.ep);
  ep_ = groups.spanning(sim::ParallelGroup::kEp);
  if (ep_ != nullptr) expert_dp_ = groups.spanning(sim::ParallelGroup::kExpertDp);
  pp_ = groups.spanning(sim::ParallelGroup::kPp);
  dp_ = groups.spanning(sim::ParallelGroup::kDp);
  cp_ = groups.spanning(sim::ParallelGroup::kCp);
  replicas_ = groups.spanning(sim::ParallelGroup::kDpCp);
  // std::invalid_argument unless the sequence is a multiple of 2·cp.
  if (cp_ != nullptr) sequence_split_.emplace(static_cast<int>(model.seq_length), layout.cp, cp_->rank());
  tp_ = groups.spanning(sim::ParallelGroup::kTp);
  if (pp_ != nullptr && model.tie_embeddings) {
    embedding_ = groups.spanning(sim::ParallelGroup::kEmbedding);
    const bool member = pp_->rank() == 0 || pp_->rank() == layout.pp - 1;
    require(member == (embedding_ != nullptr), "tied embeddings need the embedding group of the first and last stage");
  }
  stage_ = pp_ == nullptr ? 0 : pp_->rank();
  microbatches_ = layout.gbs / (layout.mbs * layout.dp);
  shape_.micro_batch = layout.mbs;

  sim::ModelConfig plan_model = model;
  plan_model.seq_length = shape_.seq;  // the rank's S/cp tokens of each sequence
  plan_model.hidden_dropout = plan_model.attention_dropout = 0;
  plan_ = sim::build_plan(plan_model, plan_layout(layout));  // std::invalid_argument for a schedule it cannot run
  program_ = pipeline::stage_program_of(plan_, stage_);
  build_chunks();
  buffer_elements_ = master_elements_ = elements_;
  if (replicas_ != nullptr) {
    plan_gradient_buckets_of_stage();
    buffer_elements_ = buckets_.back().begin + buckets_.back().elements;
  }
  if (layout.zero >= 1 && replicas_ != nullptr) {
    // Every bucket in buffer order, each sharded over the group that reduces
    // it: the experts' over the expert-dp replicas (none when dp = ep), the rest over dp x cp.
    std::vector<data_parallel::GradientBucket> all;
    std::vector<comm::Communicator*> over;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      all.push_back({buckets_[b].begin, buckets_[b].elements});
      over.push_back(expert_bucket_[b] ? expert_dp_ : replicas_);
    }
    sharded_ = std::make_unique<data_parallel::DistributedOptimizer>(*replicas_, std::move(all), std::move(over),
                                                                     decayed_);
    // Beside tp and pp the norm is the whole model's: this rank's shards, the
    // replicated tensors on tp rank 0 only and the tied copy not at all.
    std::vector<comm::Communicator*> then_over;
    for (comm::Communicator* g : {tp_, pp_})
      if (g != nullptr) then_over.push_back(g);
    if (!then_over.empty()) sharded_->count_in_norm(norm_ranges(), std::move(then_over));
    if (layout.overlap_param_gather) {
      sharded_->defer_gathers(true);
      std::vector<int> order;  // gathered in the order the program first reads them
      for (const std::vector<int>& bs : gathers_before_action_) order.insert(order.end(), bs.begin(), bs.end());
      sharded_->gather_in_order(std::move(order));
    } else {
      gathers_before_action_.clear();
    }
    master_elements_ = sharded_->shard_elements();
  } else {
    gathers_before_action_.clear();
  }
  SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  plan_memory();
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&to_comm_, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&from_comm_, cudaEventDisableTiming));
  initialise_parameters(model);
  if (replicas_ != nullptr)
    reducer_ = std::make_unique<data_parallel::GradientReducer>(
        *replicas_, buffers_.gradients, bucket_ranges(),
        sharded_ ? data_parallel::Reduction::kReduceScatter : data_parallel::Reduction::kAllReduce);
  // ep > 1: the experts' gradients summed over the ranks holding the same experts (none when dp = ep).
  if (expert_dp_ != nullptr)
    expert_reducer_ = std::make_unique<data_parallel::GradientReducer>(
        *expert_dp_, buffers_.gradients, bucket_ranges(true),
        sharded_ ? data_parallel::Reduction::kReduceScatter : data_parallel::Reduction::kAllReduce);
  // Not under tp: every tp rank computes the replicated tensors' gradients (the
  // output layer's among them) and relies on computing them alike, so the ranks
  // keep cuBLASLt's heuristic choice, which depends on the shapes only, instead
  // of each timing its own; not under pp: the pass would meet the other stages;
  // not under cp: its attention exchanges K/V with the other cp ranks.
  if (options_.tune_gemms && tp_ == nullptr && pp_ == nullptr && cp_ == nullptr) tune_gemms();
}

void Trainer::build_chunks() {
  // The chunks' parameters, one range of the flat buffers each, in chunk order.
  for (int c = 0; c < plan_.shape.vpp; ++c) {
    const sim::ChunkLayers& held = plan_.shape.split.chunk(stage_, c);
    TransformerShape chunk_shape = shape_;
    chunk_shape.num_layers = held.num_layers;
    chunks_.emplace_back(chunk_shape, StageParts{held.first_layer, held.embedding, held.loss});
    chunks_.back().offset = elements_;
    elements_ += chunks_.back().layout.total_elements();
    if (shape_.sequence_parallel && tp_ != nullptr)
      chunks_.back().partial_gradients = std::make_unique<tensor_parallel::PartialGradients>(chunks_.back().layout);
  }
  for (const Chunk& chunk : chunks_)
    for (const auto& [begin, end] : chunk.layout.decayed_ranges())
      decayed_.emplace_back(chunk.offset + begin, chunk.offset + end);
}

void Trainer::plan_memory() {
  ArenaPlan memory;
  const OptimizerSlots optimizer =
      plan_optimizer_buffers(memory, buffer_elements_, master_elements_, sharded_ ? replicas_->size() : 1);
  const std::size_t local_tokens = static_cast<std::size_t>(microbatches_) * static_cast<std::size_t>(shape_.tokens());
  ArenaPlan::Slot losses = -1, gathered = -1;
  if (pp_ != nullptr)
    losses = memory.add("per-token losses (fp32)", MemoryCategory::kOther, local_tokens * sizeof(float));
  if (replicas_ != nullptr)
    gathered = memory.add("per-token losses of the dp x cp group (fp32)", MemoryCategory::kOther,
                          static_cast<std::size_t>(layout_.gbs) * shape_.seq * layout_.cp * sizeof(float));
  // The activation slots: each an overlay that every chunk's Transformer of
  // that slot lays its stored activations over (they hold it one at a time:
  // stage_program.h), the pass's scratch shared by all (transformer.h). One
  // chunk in one slot (pp = 1) needs no overlay.
  const bool overlays = program_.slots > 1 || chunks_.size() > 1;
  transformer::MoeOptions moe = options_.moe;
  // Each micro-batch's router losses enter the step's loss as their mean over
  // the global batch's gbs / mbs micro-batches, as the language-model loss does.
  moe.router_loss_weight = static_cast<float>(layout_.mbs) / static_cast<float>(layout_.gbs);
  for (int s = 0; s < program_.slots; ++s) {
    const ArenaPlan::Overlay slot = overlays ? memory.add_overlay("activation slot " + std::to_string(s)) : 0;
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      chunks_[c].slots.push_back(std::make_unique<Transformer>(
          chunks_[c].shape, layout_.recompute, microbatches_, memory, chunks_[c].parts,
          overlays ? ArenaPlan::Place{slot, static_cast<int>(c)} : ArenaPlan::Place{}, moe));
  }
  plan_expert_balancing(memory);
  arena_ = std::make_unique<DeviceArena>(memory);
  buffers_ = bind_optimizer_buffers(*arena_, optimizer);
  if (pp_ != nullptr) losses_ = arena_->get<float>(losses);
  if (replicas_ != nullptr) gathered_losses_ = arena_->get<float>(gathered);
  for (Chunk& chunk : chunks_)
    for (auto& slot : chunk.slots)
      slot->bind(*arena_, chunk.layout,
                 ParameterBuffers{buffers_.weights + chunk.offset, buffers_.gradients + chunk.offset}, stream_, tp_,
                 ep_, cp_);
  bind_expert_balancing();
  // A backward's sent gradient and the next forward's received input may be in
  // flight in one exchange on the same slot for two chunks (stage_program.h):
  // safe only with the gradient at one place for every chunk of the slot.
  for (std::size_t s = 0; s < static_cast<std::size_t>(program_.slots); ++s)
    for (const Chunk& chunk : chunks_)
      if (chunk.slots[s]->residual_gradient() != chunks_.front().slots[s]->residual_gradient())
        throw std::logic_error("Trainer: activation slot " + std::to_string(s) +
                               " holds the residual stream's gradient at two places");
}

Trainer::~Trainer() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (comm::Communicator* g : groups_in_use()) cudaStreamSynchronize(g->stream());
  reducer_.reset();
  expert_reducer_.reset();
  sharded_.reset();
  if (to_comm_ != nullptr) cudaEventDestroy(to_comm_);
  if (from_comm_ != nullptr) cudaEventDestroy(from_comm_);
  if (graph_ != nullptr) cudaGraphExecDestroy(graph_);
  chunks_.clear();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::vector<comm::Communicator*> Trainer::groups_in_use() const {
  // tp first: its collectives sit inside the forward and backward, so a hung
  // one is named there rather than as a later group's wait behind it.
  std::vector<comm::Communicator*> in_use;
  // The dp x cp group is dp's own communicator at cp = 1: listed once.
  comm::Communicator* replicas = replicas_ == dp_ ? nullptr : replicas_;
  for (comm::Communicator* g : {tp_, cp_, ep_, pp_, embedding_, dp_, replicas, expert_dp_})
    if (g != nullptr) in_use.push_back(g);
  return in_use;
}

void Trainer::on_group(comm::Communicator& group, const std::function<void()>& op) {
  SEXTANT_CUDA_CHECK(cudaEventRecord(to_comm_, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(group.stream(), to_comm_, 0));
  op();
  SEXTANT_CUDA_CHECK(cudaEventRecord(from_comm_, group.stream()));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, from_comm_, 0));
}

void Trainer::wait_for_compute_stream() {
  const std::vector<comm::Communicator*> groups = groups_in_use();
  try {
    // Each group's stream waits for the compute stream, so once all are done, so is it.
    for (comm::Communicator* group : groups) {
      SEXTANT_CUDA_CHECK(cudaEventRecord(to_comm_, stream_));
      SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(group->stream(), to_comm_, 0));
      group->synchronize(options_.comm_timeout);
    }
  } catch (...) {
    // Peers may be stuck in another group's collectives, and this rank's
    // streams behind them: aborting all lets the streams, and the destructors, finish.
    for (comm::Communicator* group : groups) group->abort();
    throw;
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Trainer::Located Trainer::find(const std::string& name) const {
  for (const Chunk& chunk : chunks_)
    for (const ParameterTensor& t : chunk.layout.tensors())
      if (t.name == name) return {&chunk, &t};
  throw std::out_of_range("pipeline stage " + std::to_string(stage_) + " holds no tensor called '" + name + "'");
}

std::vector<ParameterLayout> Trainer::chunk_layouts() const {
  std::vector<ParameterLayout> layouts;
  for (const Chunk& chunk : chunks_) layouts.push_back(chunk.layout);
  return layouts;
}

std::vector<std::string> Trainer::tensor_names() const {
  std::vector<std::string> names;
  for (const Chunk& chunk : chunks_)
    for (const ParameterTensor& t : chunk.layout.tensors()) names.push_back(t.name);
  return names;
}

std::int64_t Trainer::parameter_count() const {
  std::int64_t count = 0;
  for (const Chunk& chunk : chunks_) count += chunk.layout.parameter_count();
  return count;
}

void Trainer::initialise_parameters(const sim::ModelConfig& model) {
  // Stream ids from the whole model's layout (its tensor order does not depend
  // on tp or pp), and each element at its index in the whole tensor
  // (draw_initial_values), so every rank draws what one GPU would.
  const ParameterLayout whole(shape_);
  const std::size_t tensors = whole.tensors().size();
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < tensors; ++i) index[whole.tensors()[i].name] = i;
  const int tp = tp_ == nullptr ? 1 : tp_->size(), tp_rank = tp_ == nullptr ? 0 : tp_->rank();
  const int ep_rank = ep_ == nullptr ? 0 : ep_->rank();
  // The whole fp32 stage: the master copy, or with a sharded one the gradient
  // buffer as scratch, whose blocks the shard then takes.
  float* full = sharded_ ? buffers_.gradients : buffers_.master;
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(full, 0, buffer_elements_ * sizeof(float), stream_));  // padding too
  for (const Chunk& chunk : chunks_)
    for (const ParameterTensor& t : chunk.layout.tensors())
      draw_initial_values(full + chunk.offset + t.offset, t, index.at(t.name), tp, tp_rank, ep_rank, options_,
                          model.num_layers, stream_);
  kernels::convert_to_bf16(buffers_.weights, full, buffer_elements_, stream_);
  if (sharded_) sharded_->copy_to_shard(full, 0, buffer_elements_, buffers_.master, stream_);
  // Once: the padding between tensors is never written and the norm reads it.
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.gradients, 0, buffer_elements_ * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.adam_m, 0, master_elements_ * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(buffers_.adam_v, 0, master_elements_ * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Trainer::upload(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  const std::size_t sequence = static_cast<std::size_t>(shape_.seq) * static_cast<std::size_t>(layout_.cp);
  const std::size_t expected = static_cast<std::size_t>(layout_.gbs) * sequence;
  if (inputs.size() != expected || targets.size() != expected)
    throw std::invalid_argument("Trainer: a step takes global_batch x seq = " + std::to_string(expected) +
                                " inputs and targets");
  if (sequence_split_) {
    upload_local_chunks(inputs, targets);
    return;
  }
  // Local micro-batch i is global micro-batch dp_rank + i·dp: without dp, the
  // whole batch in one copy. The stage's slots share one set of tokens and
  // targets (Transformer's constructor). Pageable copies: cudaMemcpyAsync
  // stages them, and they are a few hundred KiB.
  const int dp = data_parallel_size(), dp_rank = dp_ == nullptr ? 0 : dp_->rank();
  const std::size_t per_mb = static_cast<std::size_t>(shape_.tokens());
  const int copies = dp == 1 ? 1 : microbatches_;
  const std::size_t per_copy = dp == 1 ? expected : per_mb;
  for (const Chunk& chunk : chunks_) {
    if (!chunk.parts.embedding && !chunk.parts.output) continue;
    const Transformer& any_slot = *chunk.slots.front();
    for (int i = 0; i < copies; ++i) {
      const std::size_t from = static_cast<std::size_t>(dp_rank + i * dp) * per_mb;
      const std::size_t to = static_cast<std::size_t>(i) * per_mb;
      if (chunk.parts.embedding)
        SEXTANT_CUDA_CHECK(cudaMemcpyAsync(any_slot.tokens() + to, inputs.data() + from,
                                           per_copy * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
      if (chunk.parts.output)
        SEXTANT_CUDA_CHECK(cudaMemcpyAsync(any_slot.targets() + to, targets.data() + from,
                                           per_copy * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    }
  }
}

void Trainer::upload_local_chunks(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  // Context parallelism: of each sequence of this rank's micro-batches (those
  // of its dp rank, as without cp), its two chunks back to back
  // (ContextParallelChunks), gathered on the host and copied in one piece.
  const ContextParallelChunks& split = *sequence_split_;
  const int dp = data_parallel_size(), dp_rank = dp_ == nullptr ? 0 : dp_->rank();
  const std::size_t sequence = static_cast<std::size_t>(split.sequence_tokens());
  const std::size_t local = static_cast<std::size_t>(split.local_tokens());
  const std::size_t chunk = static_cast<std::size_t>(split.chunk_tokens());
  const std::size_t sequences = static_cast<std::size_t>(microbatches_) * static_cast<std::size_t>(layout_.mbs);
  local_inputs_.resize(sequences * local);
  local_targets_.resize(sequences * local);
  for (int i = 0; i < microbatches_; ++i)
    for (int b = 0; b < layout_.mbs; ++b) {
      // Sequence b of global micro-batch dp_rank + i·dp, and its place here.
      const std::size_t global = static_cast<std::size_t>(dp_rank + i * dp) * layout_.mbs + b;
      const std::size_t here = static_cast<std::size_t>(i) * layout_.mbs + b;
      for (int j = 0; j < 2; ++j) {
        const std::size_t from = global * sequence + static_cast<std::size_t>(split.chunk_start(j));
        const std::size_t to = here * local + static_cast<std::size_t>(j) * chunk;
        std::copy_n(inputs.data() + from, chunk, local_inputs_.data() + to);
        std::copy_n(targets.data() + from, chunk, local_targets_.data() + to);
      }
    }
  for (const Chunk& c : chunks_) {
    if (!c.parts.embedding && !c.parts.output) continue;
    const Transformer& any_slot = *c.slots.front();
    if (c.parts.embedding)
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(any_slot.tokens(), local_inputs_.data(),
                                         local_inputs_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    if (c.parts.output)
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(any_slot.targets(), local_targets_.data(),
                                         local_targets_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                                         stream_));
  }
  // Pageable sources: cudaMemcpyAsync returns once it has staged them (CUDA
  // runtime API, "API synchronization behavior"), so the vectors may be refilled.
}

void Trainer::zero_embedding_gradients() {
  // Scatter-added tables (transformer.h): rows of tokens a step lacks are never
  // written, so these start from zero each step. A tied wte is written first
  // by the output layer's weight-gradient GEMM where the chunk holds both; on a
  // first stage without the output it is zeroed too.
  for (const Chunk& chunk : chunks_) {
    if (!chunk.parts.embedding) continue;
    const ParameterLayout& l = chunk.layout;
    const bool written_by_output = shape_.tie_embeddings && chunk.parts.output;
    for (const int tensor : {l.wpe(), written_by_output ? LayerTensors::kAbsent : l.wte()}) {
      if (tensor == LayerTensors::kAbsent) continue;
      const ParameterTensor& t = l.tensor(tensor);
      SEXTANT_CUDA_CHECK(
          cudaMemsetAsync(buffers_.gradients + chunk.offset + t.offset, 0, t.elements() * sizeof(float), stream_));
    }
  }
}

void Trainer::run_compute(const StageAction& a, float loss_scale) {
  const sim::Task& t = plan_.tasks[a.task];
  Transformer& m = *chunks_[t.chunk].slots[static_cast<std::size_t>(a.slot)];
  const bool recompute = t.pass == sim::Pass::kRecompute;
  const bool forward = t.pass == sim::Pass::kForward || recompute;
  m.set_accumulate_gradients(t.microbatch > 0);
  if (t.kind == sim::TaskKind::kTensorParallel || t.kind == sim::TaskKind::kTensorParallelGather ||
      t.kind == sim::TaskKind::kTensorParallelScatter) {
    if (t.block != sim::Block::kAttention && t.block != sim::Block::kMlp)
      throw std::logic_error("Trainer: a tensor-parallel task of no layer block: " + sim::task_name(plan_, t));
    m.tp_task(t.kind, t.block == sim::Block::kAttention ? Transformer::Part::kAttention : Transformer::Part::kMlp,
              a.local_layer, !forward, recompute);
    return;
  }
  switch (t.block) {
    case sim::Block::kEmbedding:
      forward ? m.embedding_forward(t.microbatch) : m.embedding_backward(t.microbatch);
      break;
    case sim::Block::kAttention:
      forward ? m.attention_forward(a.local_layer, recompute) : m.attention_backward(a.local_layer);
      break;
    case sim::Block::kMlp:
      forward ? m.mlp_forward(a.local_layer, recompute) : m.mlp_backward(a.local_layer);
      break;
    case sim::Block::kOutput:
      forward ? m.output_forward(t.microbatch, loss_scale) : m.output_backward();
      break;
    case sim::Block::kAttentionCore:
    case sim::Block::kSharedExpertFc1:
    case sim::Block::kSharedExpertFc2:
    case sim::Block::kNone:
      throw std::logic_error("Trainer: the plan holds a task the engine does not run: " + sim::task_name(plan_, t));
  }
}

void Trainer::exchange(const StageAction& a) {
  // The residual stream's rows: 1/tp of the tokens under sp (Korthikanti et
  // al. 2022, Sec. 4.2.3: the stages exchange the sequence-parallel shards).
  const std::size_t count = static_cast<std::size_t>(shape_.norm_tokens()) * static_cast<std::size_t>(shape_.hidden);
  auto model = [&](const Transfer& x) -> Transformer& {
    return *chunks_[static_cast<std::size_t>(x.chunk)].slots[static_cast<std::size_t>(x.slot)];
  };
  // Forward: a chunk's output goes, the next one's input comes; backward: the
  // residual stream's gradient both ways (transformer.h).
  sends_.clear();
  receives_.clear();
  for (const Transfer& t : a.sends)
    sends_.push_back({t.direction == Direction::kForward ? model(t).stage_output() : model(t).residual_gradient(),
                      count, t.peer});
  for (const Transfer& t : a.receives)
    receives_.push_back({t.direction == Direction::kForward ? model(t).stage_input() : model(t).residual_gradient(),
                         count, t.peer});
  on_group(*pp_, [&] { pp_->exchange(sends_, receives_, comm::DataType::kBf16); });
  for (const Transfer& t : a.receives) {
    if (t.direction != Direction::kBackward) continue;
    Transformer& m = model(t);
    m.set_accumulate_gradients(t.microbatch > 0);
    m.output_gradient_received();
  }
}

void Trainer::run_program(int step) {
  // overlap_param_gather: the last update's weights gathered while this
  // program runs, each bucket waited for before the first action reading it.
  if (sharded_ && sharded_->gather_pending()) sharded_->queue_gathers(buffers_.weights, stream_);
  zero_embedding_gradients();
  reset_expert_load();
  // 1 / the global batch's tokens: gbs whole sequences of seq·cp tokens (seq is the rank's S/cp).
  const float loss_scale =
      1.0f / static_cast<float>(static_cast<double>(layout_.gbs) * shape_.seq * layout_.cp);
  for (std::size_t k = 0; k < program_.actions.size(); ++k) {
    const StageAction& a = program_.actions[k];
    if (!gathers_before_action_.empty())
      for (const int b : gathers_before_action_[k]) sharded_->wait_for_gather(static_cast<std::size_t>(b), stream_);
    // Timed under the Plan's names; an exchange under its first send's (the
    // Plan has no receive tasks: a lone receive's wait is timed as nothing).
    if (a.kind == StageAction::Kind::kExchange && a.sends.empty()) {
      timer_.end(stream_);
    } else if (timer_.enabled()) {
      task_name_.clear();
      sim::append_task_name(plan_, plan_.tasks[a.task], task_name_);
      timer_.begin(task_name_, stream_);
    }
    switch (a.kind) {
      case StageAction::Kind::kCompute: run_compute(a, loss_scale); break;
      case StageAction::Kind::kExchange: exchange(a); break;
      case StageAction::Kind::kOptimizerStep:
        finish_gradients();
        if (step > 0) queue_optimizer(step);
        break;
    }
    // dp: the buckets whose gradients this action finished, reduced while the program goes on.
    if (reduce_gradients_ && !buckets_after_action_.empty())
      for (const int b : buckets_after_action_[k]) reduce_bucket(b);
  }
  timer_.end(stream_);
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
  result.moe = take_moe_statistics();
  if (!result.skipped) ++steps_done_;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

double Trainer::forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  upload(inputs, targets);
  queue_step(0);
  const double loss = read_results(nullptr);
  timer_.collect();
  return loss;
}

void Trainer::settle_parameter_gathers() const {
  if (sharded_) sharded_->settle_gathers(buffers_.weights, stream_);
}

void Trainer::set_parameter(const std::string& name, std::span<const float> values) {
  const Located at = find(name);
  const std::size_t offset = at.chunk->offset + at.tensor->offset;
  if (values.size() != at.tensor->elements())
    throw std::invalid_argument("set_parameter(" + name + "): " + std::to_string(values.size()) + " values for " +
                                std::to_string(at.tensor->elements()) + " elements");
  settle_parameter_gathers();
  float* full = sharded_ ? buffers_.gradients : buffers_.master;  // the tensor's whole fp32 values
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(full + offset, values.data(), values.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream_));
  kernels::convert_to_bf16(buffers_.weights + offset, full + offset, values.size(), stream_);
  if (sharded_) sharded_->copy_to_shard(full, offset, values.size(), buffers_.master, stream_);
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::vector<float> Trainer::master_parameter(const std::string& name) const {
  const Located at = find(name);
  const std::size_t offset = at.chunk->offset + at.tensor->offset;
  if (sharded_) return sharded_->values_from_shard(buffers_.master, offset, at.tensor->elements(), stream_);
  return download_array(buffers_.master + offset, at.tensor->elements(), stream_);
}

std::vector<float> Trainer::gradient(const std::string& name) const {
  const Located at = find(name);
  return download_array(buffers_.gradients + at.chunk->offset + at.tensor->offset, at.tensor->elements(), stream_);
}

std::vector<float> Trainer::weight(const std::string& name) const {
  const Located at = find(name);
  settle_parameter_gathers();
  return download_bf16_as_floats(buffers_.weights + at.chunk->offset + at.tensor->offset, at.tensor->elements(),
                                 stream_);
}

void Trainer::set_gradient(const std::string& name, std::span<const float> values) {
  const Located at = find(name);
  if (values.size() != at.tensor->elements())
    throw std::invalid_argument("set_gradient(" + name + "): " + std::to_string(values.size()) + " values for " +
                                std::to_string(at.tensor->elements()) + " elements");
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(buffers_.gradients + at.chunk->offset + at.tensor->offset, values.data(),
                                     values.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

checkpoint::TrainerState Trainer::state() const {
  settle_parameter_gathers();
  checkpoint::TrainerState s = read_trainer_state(buffers_, steps_done_, stream_);
  for (const std::vector<float>& layer : expert_biases())
    s.expert_biases.insert(s.expert_biases.end(), layer.begin(), layer.end());
  return s;
}

void Trainer::restore(const checkpoint::TrainerState& s) {
  settle_parameter_gathers();  // before the weights are overwritten
  write_trainer_state(buffers_, s, "Trainer::restore", stream_);
  restore_expert_biases(s.expert_biases);
  steps_done_ = static_cast<int>(s.steps_done);
}

}  // namespace sextant::engine

namespace sextant::engine {

transformer::MoeStatistics Trainer::take_moe_statistics() {
  // Chunks hold other layers (concatenated in chunk order); a chunk's slots the
  // same layers (summed).
  transformer::MoeStatistics all;
  for (Chunk& chunk : chunks_) {
    transformer::MoeStatistics of_chunk;
    for (auto& slot : chunk.slots) transformer::accumulate(of_chunk, slot->take_moe_statistics());
    all.expert_tokens.insert(all.expert_tokens.end(), of_chunk.expert_tokens.begin(), of_chunk.expert_tokens.end());
    all.expert_rows.insert(all.expert_rows.end(), of_chunk.expert_rows.begin(), of_chunk.expert_rows.end());
    all.aux_loss_sum += of_chunk.aux_loss_sum;
    all.z_loss_sum += of_chunk.z_loss_sum;
    all.layer_passes += of_chunk.layer_passes;
  }
  // DeepSeek-V3's biases as they are now: each MoE layer's spread over its experts.
  for (const std::vector<float>& layer : expert_biases()) {
    const auto [low, high] = std::minmax_element(layer.begin(), layer.end());
    all.expert_bias_spread.push_back(static_cast<double>(*high) - static_cast<double>(*low));
  }
  return all;
}

}  // namespace sextant::engine
