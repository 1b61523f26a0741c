#include "sim/plan/plan_builder.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/comm/fsdp_comm.h"
#include "sim/plan/task_writer.h"

namespace sextant::sim {

namespace {

enum Direction { kForwardDir = 0, kBackwardDir = 1 };

class PlanBuilder {
 public:
  PlanBuilder(const ModelConfig& model, const ParallelLayout& layout, const PlanOptions& options)
      : m_(model), l_(layout), options_(options) {}

  Plan build() {
    PlanShape& s = plan_.shape;
    s.schedule = options_.schedule.value_or(pipeline_schedule_of(l_));
    s.pp = l_.pp;
    s.vpp = s.schedule == PipelineSchedule::kInterleaved ? l_.vpp : 1;
    if (l_.vpp > 1 && s.schedule != PipelineSchedule::kInterleaved) {
      throw std::invalid_argument("schedule " + std::string(to_string(s.schedule)) +
                                  " runs one model chunk per stage; the layout has vpp=" +
                                  std::to_string(l_.vpp));
    }
    s.microbatches = l_.num_microbatches();
    s.num_layers = m_.num_layers;
    s.split = pipeline_split(m_, l_);
    // Megatron's non-interleaved schedule exchanges activations and gradients
    // with blocking batched send/recv. The interleaved schedule overlaps them,
    // and ZB-H1 needs that too: Qi et al.'s schedule assumes that only data
    // dependencies delay a pass; with blocking exchanges the stages lock step
    // and the deferred W's fill nothing (4 stages, 8 micro-batches, all passes
    // 1: 33 with blocking sends, as 1F1B, and 27 without).
    s.blocking_p2p = s.schedule == PipelineSchedule::kGpipe ||
                     s.schedule == PipelineSchedule::kOneFOneB;
    s.sequential_p2p =
        s.blocking_p2p && options_.pipeline_exchange == PipelineExchange::kSequential;
    s.sequence_parallel = l_.sp;
    s.cp_all_gather = l_.cp_comm_type == CpCommType::kAllGather;
    s.zero = l_.zero;
    has_dp_ = l_.dp * l_.cp > 1 || (m_.moe && l_.expert_dp() > 1);
    fsdp_ = fsdp_behaviour_of(m_, l_);
    bucket_of_layer_.assign(static_cast<std::size_t>(m_.num_layers), -1);
    // About 8 tasks per layer and micro-batch, each with 1 or 2 dependencies.
    const std::size_t estimate = static_cast<std::size_t>(s.microbatches) * m_.num_layers * 9 + 64;
    plan_.tasks.reserve(estimate);
    plan_.deps.reserve(estimate * 5 / 4);

    TaskWriter writer(plan_, 2u * s.pp * s.vpp * s.microbatches);
    w_ = &writer;
    for (int stage = 0; stage < s.pp; ++stage) {
      plan_.stage_begin.push_back(static_cast<std::uint32_t>(plan_.tasks.size()));
      build_stage(stage);
    }
    plan_.stage_begin.push_back(static_cast<std::uint32_t>(plan_.tasks.size()));
    writer.resolve();
    return std::move(plan_);
  }

 private:
  Task make(TaskKind kind, Block block, Pass pass, StreamKind stream, int chunk, int microbatch,
            int layer, int bucket = kNoIndex) const {
    Task t;
    t.kind = kind;
    t.block = block;
    t.pass = pass;
    t.stream = stream;
    t.stage = static_cast<std::uint16_t>(stage_);
    t.chunk = static_cast<std::uint16_t>(chunk);
    t.microbatch = microbatch;
    t.layer = layer;
    t.bucket = bucket;
    return t;
  }

  // ---- one stage ----

  void build_stage(int stage) {
    stage_ = stage;
    w_->begin_stage();
    last_dp_ = kNoTask;
    use_starts_.clear();
    reduces_.clear();
    const PlanShape& s = plan_.shape;

    first_bucket_ = static_cast<int>(plan_.buckets.size());
    const std::vector<GradientBucket> buckets = stage_gradient_buckets(
        m_, l_, s, stage, options_.bucket_params.value_or(default_bucket_params(l_)));
    embedding_bucket_ = output_bucket_ = -1;
    for (const GradientBucket& b : buckets) {
      const int index = static_cast<int>(plan_.buckets.size());
      plan_.buckets.push_back(b);
      for (int layer = b.first_layer; layer <= b.last_layer; ++layer) {
        bucket_of_layer_[static_cast<std::size_t>(layer)] = index;
      }
      if (b.embedding) embedding_bucket_ = index;
      if (b.output_layer) output_bucket_ = index;
    }
    gather_.assign(buckets.size(), kNoTask);

    // Weights updated by the last step, gathered before their first forward.
    if (has_dp_ && overlapped_param_gather()) {
      for (int b = static_cast<int>(plan_.buckets.size()) - 1; b >= first_bucket_; --b) {
        gather_[static_cast<std::size_t>(b - first_bucket_)] =
            add_dp(TaskKind::kParameterGather, b, kNoIndex, Pass::kNone, {});
      }
    }

    const std::vector<PipelineOp> program =
        stage_program(s.schedule, s.pp, s.vpp, s.microbatches, stage, l_.moe_a2a_overlap ? 1 : 0);
    for (std::size_t i = 0; i < program.size(); ++i) {
      const PipelineOp& op = program[i];
      if (l_.moe_a2a_overlap && i + 1 < program.size() && pairable(op, program[i + 1])) {
        const bool forward_first = op.kind == PassKind::kForward;
        combined(forward_first ? op : program[i + 1], forward_first ? program[i + 1] : op);
        ++i;
        continue;
      }
      switch (op.kind) {
        case PassKind::kForward: forward(op.chunk, op.microbatch); break;
        case PassKind::kBackward: backward(op.chunk, op.microbatch, Pass::kBackward); break;
        case PassKind::kBackwardInput: backward(op.chunk, op.microbatch, Pass::kBackwardInput); break;
        case PassKind::kBackwardWeight: weight_gradients(op.chunk, op.microbatch); break;
      }
    }

    if (has_dp_ && !l_.overlap_grad_reduce && l_.zero < 2) {
      for (int b = first_bucket_; b < static_cast<int>(plan_.buckets.size()); ++b) {
        add_dp(TaskKind::kGradientReduce, b, kNoIndex, Pass::kNone,
               {DepRef::task(w_->last_compute())});
      }
    }
    if (m_.tie_embeddings && s.pp > 1 && (stage == 0 || stage == s.pp - 1)) {
      // The tied embedding's gradient, between the two copies, once the
      // stage's gradients are reduced (Megatron finalize_model_grads,
      // DeepSpeed ReduceTiedGrads): on the DP stream, before the optimizer.
      std::vector<DepRef> deps{DepRef::task(w_->last_compute())};
      if (last_dp_ != kNoTask) deps.push_back(DepRef::task(last_dp_));
      last_dp_ = w_->add(make(TaskKind::kTiedEmbeddingReduce, Block::kNone, Pass::kNone,
                              StreamKind::kDataParallel, 0, kNoIndex, kNoIndex),
                         deps);
    }
    if (last_dp_ != kNoTask) w_->also_wait_for(DepRef::task(last_dp_));
    const std::uint32_t step = w_->chain(make(TaskKind::kOptimizerStep, Block::kNone, Pass::kNone,
                                              StreamKind::kCompute, 0, kNoIndex, kNoIndex));
    if (has_dp_ && (l_.zero == 1 || l_.zero == 2) && !overlapped_param_gather()) {
      for (int b = static_cast<int>(plan_.buckets.size()) - 1; b >= first_bucket_; --b) {
        add_dp(TaskKind::kParameterGather, b, kNoIndex, Pass::kNone, {DepRef::task(step)});
      }
    }
  }

  bool overlapped_param_gather() const {
    return (l_.zero == 1 || l_.zero == 2) && l_.overlap_param_gather;
  }

  std::uint32_t add_dp(TaskKind kind, int bucket, int microbatch, Pass pass,
                       std::initializer_list<DepRef> deps) {
    return add_dp(kind, bucket, microbatch, pass, std::span<const DepRef>(deps.begin(), deps.size()));
  }
  std::uint32_t add_dp(TaskKind kind, int bucket, int microbatch, Pass pass,
                       std::span<const DepRef> deps) {
    const StreamKind stream = kind == TaskKind::kParameterGather ? StreamKind::kDataParallelGather
                                                                 : StreamKind::kDataParallel;
    const Task t = make(kind, Block::kNone, pass, stream,
                        plan_.buckets[static_cast<std::size_t>(bucket)].chunk, microbatch,
                        kNoIndex, bucket);
    last_dp_ = w_->add(t, deps);
    return last_dp_;
  }

  // ---- virtual stages and sends ----

  bool first_virtual(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_virtual(int chunk) const {
    return stage_ == plan_.shape.pp - 1 && chunk == plan_.shape.vpp - 1;
  }
  std::uint32_t key(int dir, int stage, int chunk, int mb) const {
    const PlanShape& s = plan_.shape;
    return static_cast<std::uint32_t>(((dir * s.pp + stage) * s.vpp + chunk) * s.microbatches + mb);
  }
  // The virtual stage after (s, c): (s+1, c), or the first stage's next chunk.
  std::pair<int, int> next_virtual(int stage, int chunk) const {
    return stage + 1 < plan_.shape.pp ? std::pair{stage + 1, chunk} : std::pair{0, chunk + 1};
  }
  std::pair<int, int> previous_virtual(int stage, int chunk) const {
    return stage > 0 ? std::pair{stage - 1, chunk} : std::pair{plan_.shape.pp - 1, chunk - 1};
  }

  // A receiving op waits for the send; the receive is posted once the
  // stage's compute chain before the op is done.
  void receive(int dir, int chunk, int mb) {
    const auto [from_stage, from_chunk] =
        dir == kForwardDir ? previous_virtual(stage_, chunk) : next_virtual(stage_, chunk);
    const std::uint32_t from = key(dir, from_stage, from_chunk, mb);
    w_->record_receive_posted(key(dir, stage_, chunk, mb));
    if (plan_.shape.sequential_p2p) {
      // The blocking receive starts once the sender has posted its send.
      w_->also_wait_for({DepRef::Kind::kSendPosted, from});
      w_->chain(make(TaskKind::kPipelineReceive, Block::kNone,
                     dir == kForwardDir ? Pass::kForward : Pass::kBackward,
                     dir == kForwardDir ? StreamKind::kPipelineForward
                                        : StreamKind::kPipelineBackward,
                     chunk, mb, kNoIndex));
    }
    w_->also_wait_for({DepRef::Kind::kSend, from});
  }

  void send(int dir, int chunk, int mb) {
    const auto [to_stage, to_chunk] =
        dir == kForwardDir ? next_virtual(stage_, chunk) : previous_virtual(stage_, chunk);
    std::vector<DepRef> deps;
    for (std::uint32_t id : w_->chain_ends()) deps.push_back(DepRef::task(id));
    w_->record_send_posted(key(dir, stage_, chunk, mb), w_->chain_ends().front());
    if (plan_.shape.blocking_p2p) {
      deps.push_back({DepRef::Kind::kReceivePosted, key(dir, to_stage, to_chunk, mb)});
    }
    const StreamKind stream =
        dir == kForwardDir ? StreamKind::kPipelineForward : StreamKind::kPipelineBackward;
    const std::uint32_t id =
        w_->add(make(TaskKind::kPipelineSend, Block::kNone,
                     dir == kForwardDir ? Pass::kForward : Pass::kBackward, stream, chunk, mb,
                     kNoIndex),
                deps, w_->chain_ends().front());
    w_->record_send(key(dir, stage_, chunk, mb), id);
    if (plan_.shape.blocking_p2p) w_->join_chain(id);
  }

  // ---- data-parallel buckets ----

  const GradientBucket& bucket(int index) const {
    return plan_.buckets[static_cast<std::size_t>(index)];
  }
  bool has_layers(const GradientBucket& b) const { return b.last_layer >= b.first_layer; }

  // ZeRO-3 / FSDP: unit `b`'s weights gathered for its use in micro-batch `mb`
  // (fsdp_behaviour.h). With prefetch depth d the gather of use k may start
  // once compute reaches use k−d (FSDP2: the next all-gather waits for the
  // current unit's copy-out); with d = 0 it starts when compute reaches use k.
  // The unit's compute waits for it.
  void fsdp_gather(int b, int mb, Pass pass) {
    use_starts_.push_back(w_->last_compute());
    const std::size_t k = use_starts_.size() - 1;
    const auto d = static_cast<std::size_t>(fsdp_.prefetch_units);
    std::vector<DepRef> deps;
    if (d == 0) {
      deps = w_->chain_deps();
    } else if (k >= d && use_starts_[k - d] != kNoTask) {
      deps.push_back(DepRef::task(use_starts_[k - d]));
    }
    w_->also_wait_for(DepRef::task(add_dp(TaskKind::kParameterGather, b, mb, pass, deps)));
  }

  // Before the first forward use of bucket `b` in micro-batch `mb`.
  void use_for_forward(int b, int mb) {
    if (!has_dp_ || b < 0) return;
    if (l_.zero >= 3) {
      fsdp_gather(b, mb, Pass::kForward);
      return;
    }
    std::uint32_t& gather = gather_[static_cast<std::size_t>(b - first_bucket_)];
    if (gather != kNoTask) {
      w_->also_wait_for(DepRef::task(gather));
      gather = kNoTask;  // later micro-batches find the weights in place
    }
  }

  void use_for_backward(int b, int mb) {
    if (!has_dp_ || b < 0 || l_.zero < 3) return;
    fsdp_gather(b, mb, Pass::kBackward);
  }

  // Micro-batch `mb`'s gradients of bucket `b` are complete.
  void gradients_ready(int b, int mb) {
    if (!has_dp_ || b < 0) return;
    const bool every_microbatch = l_.zero >= 2;
    if (!every_microbatch && mb != plan_.shape.microbatches - 1) return;
    if (!every_microbatch && !l_.overlap_grad_reduce) return;  // reduced after the backward
    const std::uint32_t reduce = add_dp(TaskKind::kGradientReduce, b,
                                        every_microbatch ? mb : kNoIndex, Pass::kNone,
                                        {DepRef::task(w_->last_compute())});
    if (l_.zero < 3) return;
    // FSDP: with q reductions in flight, compute goes on once the one q back is done.
    reduces_.push_back(reduce);
    const auto q = static_cast<std::size_t>(fsdp_.reduce_queue_units);
    if (reduces_.size() > q) w_->also_wait_for(DepRef::task(reduces_[reduces_.size() - 1 - q]));
  }

  // ---- blocks ----

  void attention(int chunk, int mb, int layer, Pass pass) {
    const bool communicates = pass != Pass::kBackwardWeight;
    const bool tp = communicates && l_.tp > 1;
    if (tp) sequence_parallel_gather(Block::kAttention, chunk, mb, layer, pass);
    const std::vector<DepRef> start = tp && l_.tp_comm_overlap ? w_->chain_deps() : std::vector<DepRef>{};
    const std::uint32_t block = w_->chain(
        make(TaskKind::kCompute, Block::kAttention, pass, StreamKind::kCompute, chunk, mb, layer));
    if (tp && l_.tp_comm_overlap) {
      w_->join_chain(w_->add(make(TaskKind::kTensorParallel, Block::kAttention, pass,
                                  StreamKind::kTensorParallel, chunk, mb, layer),
                             start));
    }
    if (communicates && l_.cp > 1) {
      const DepRef after_block[] = {DepRef::task(block)};
      const Task exchange = make(TaskKind::kContextRing, Block::kAttentionCore, pass,
                                 StreamKind::kContextParallel, chunk, mb, layer);
      const Task core_task = make(TaskKind::kCompute, Block::kAttentionCore, pass, StreamKind::kCompute,
                                  chunk, mb, layer);
      if (l_.cp_comm_type == CpCommType::kAllGather) {
        // The core waits for the whole sequence's K/V (and, in the backward,
        // the gradients' reduce-scatter is costed in the same task).
        w_->join_chain(w_->add(exchange, after_block));
        w_->chain(core_task);
      } else {
        // The ring runs beside the core, step by step.
        const std::uint32_t core = w_->chain(core_task);
        const std::uint32_t ring = w_->add(exchange, after_block);
        w_->set_chain({core, ring});
      }
    }
    if (tp) tensor_parallel(Block::kAttention, chunk, mb, layer, pass);
  }

  void mlp(int chunk, int mb, int layer, Pass pass) {
    mlp_dispatch(chunk, mb, layer, pass);
    mlp_compute(chunk, mb, layer, pass);
    mlp_combine(chunk, mb, layer, pass);
  }

  // The MLP block in three parts, so that a combined forward-backward step can
  // interleave two passes' parts (combined()).
  bool expert_comm(int layer, Pass pass) const {
    return pass != Pass::kBackwardWeight && m_.moe && l_.ep > 1 && layer >= m_.dense_layers();
  }
  // --moe-shared-expert-overlap: in the forward, half the shared expert beside
  // the dispatch, half beside the combine, on the compute stream.
  bool shared_beside(int layer, Pass pass) const {
    return l_.moe_shared_expert_overlap && pass == Pass::kForward && expert_comm(layer, pass);
  }
  void expert_all_to_all(TaskKind kind, int chunk, int mb, int layer, Pass pass) {
    const std::vector<DepRef> start =
        shared_beside(layer, pass) ? w_->chain_deps() : std::vector<DepRef>{};
    w_->chain(make(kind, Block::kMlp, pass, StreamKind::kExpertParallel, chunk, mb, layer));
    if (shared_beside(layer, pass)) {
      const Block half =
          kind == TaskKind::kExpertDispatch ? Block::kSharedExpertFc1 : Block::kSharedExpertFc2;
      w_->join_chain(
          w_->add(make(TaskKind::kCompute, half, pass, StreamKind::kCompute, chunk, mb, layer),
                  start));
    }
  }
  void mlp_dispatch(int chunk, int mb, int layer, Pass pass) {
    if (pass != Pass::kBackwardWeight && l_.tp > 1) sequence_parallel_gather(Block::kMlp, chunk, mb, layer, pass);
    if (expert_comm(layer, pass)) expert_all_to_all(TaskKind::kExpertDispatch, chunk, mb, layer, pass);
  }
  void mlp_compute(int chunk, int mb, int layer, Pass pass) {
    const bool tp = pass != Pass::kBackwardWeight && l_.tp > 1;
    const std::vector<DepRef> start = tp && l_.tp_comm_overlap ? w_->chain_deps() : std::vector<DepRef>{};
    w_->chain(make(TaskKind::kCompute, Block::kMlp, pass, StreamKind::kCompute, chunk, mb, layer));
    if (tp && l_.tp_comm_overlap) {
      w_->join_chain(w_->add(make(TaskKind::kTensorParallel, Block::kMlp, pass,
                                  StreamKind::kTensorParallel, chunk, mb, layer),
                             start));
    }
  }
  void mlp_combine(int chunk, int mb, int layer, Pass pass) {
    if (expert_comm(layer, pass)) expert_all_to_all(TaskKind::kExpertCombine, chunk, mb, layer, pass);
    if (pass != Pass::kBackwardWeight && l_.tp > 1) tensor_parallel(Block::kMlp, chunk, mb, layer, pass);
  }

  // Sequence parallelism runs its collectives where they happen (Korthikanti
  // et al. 2022, Sec. 4.2.2): an all-gather before the block's column-parallel
  // GEMM (backward: before the row-parallel one's input gradient) and a
  // reduce-scatter after its row-parallel GEMM (backward: after the
  // column-parallel one's input gradient), so the engine runs and times each
  // by name. The block's compute between them holds everything else; the
  // engine runs the norm that feeds the gather (forward) and the norm backward
  // that reads the scatter (backward) in those tasks, beside their collective.
  // With --tp-comm-overlap the collectives stay one overlapped task and a tail.
  bool split_sequence_parallel() const { return l_.sp && !l_.tp_comm_overlap; }
  void sequence_parallel_gather(Block block, int chunk, int mb, int layer, Pass pass) {
    if (!split_sequence_parallel()) return;
    w_->chain(make(TaskKind::kTensorParallelGather, block, pass, StreamKind::kTensorParallel, chunk,
                   mb, layer));
  }

  // After the block: all of its collectives, or with --tp-comm-overlap the
  // tail, or under sp the reduce-scatter.
  void tensor_parallel(Block block, int chunk, int mb, int layer, Pass pass) {
    const TaskKind kind = split_sequence_parallel() ? TaskKind::kTensorParallelScatter
                          : l_.tp_comm_overlap      ? TaskKind::kTensorParallelTail
                                                    : TaskKind::kTensorParallel;
    w_->chain(make(kind, block, pass, StreamKind::kTensorParallel, chunk, mb, layer));
  }

  // ---- passes ----

  void forward(int chunk, int mb) {
    forward_begin(chunk, mb);
    for (int j = 0; j < layers_in_chunk(plan_.shape, stage_, chunk); ++j) {
      const int layer = global_layer(plan_.shape, stage_, chunk, j);
      forward_layer_begin(mb, layer);
      attention(chunk, mb, layer, Pass::kForward);
      mlp(chunk, mb, layer, Pass::kForward);
    }
    forward_end(chunk, mb);
  }

  void forward_begin(int chunk, int mb) {
    if (first_virtual(chunk)) {
      use_for_forward(embedding_bucket_, mb);
      w_->chain(make(TaskKind::kCompute, Block::kEmbedding, Pass::kForward, StreamKind::kCompute,
                     chunk, mb, kNoIndex));
    } else {
      receive(kForwardDir, chunk, mb);
    }
  }
  void forward_layer_begin(int mb, int layer) {
    const int b = bucket_of_layer_[static_cast<std::size_t>(layer)];
    if (b >= 0 && layer == bucket(b).first_layer && !bucket(b).embedding) use_for_forward(b, mb);
  }
  void forward_end(int chunk, int mb) {
    if (last_virtual(chunk)) {
      if (output_bucket_ >= 0 && !has_layers(bucket(output_bucket_)) &&
          !bucket(output_bucket_).embedding) {
        use_for_forward(output_bucket_, mb);
      }
      w_->chain(make(TaskKind::kCompute, Block::kOutput, Pass::kForward, StreamKind::kCompute,
                     chunk, mb, kNoIndex));
    } else {
      send(kForwardDir, chunk, mb);
    }
  }

  void backward(int chunk, int mb, Pass pass) {
    backward_begin(chunk, mb);
    for (int j = layers_in_chunk(plan_.shape, stage_, chunk) - 1; j >= 0; --j) {
      const int layer = global_layer(plan_.shape, stage_, chunk, j);
      backward_layer_begin(chunk, mb, layer);
      mlp(chunk, mb, layer, pass);
      attention(chunk, mb, layer, pass);
      backward_layer_end(mb, layer, pass);
    }
    backward_end(chunk, mb);
  }

  void backward_begin(int chunk, int mb) {
    if (last_virtual(chunk)) {
      use_for_backward(output_bucket_, mb);
      w_->chain(make(TaskKind::kCompute, Block::kOutput, Pass::kBackward, StreamKind::kCompute,
                     chunk, mb, kNoIndex));
      if (output_bucket_ >= 0 && !has_layers(bucket(output_bucket_)) &&
          !bucket(output_bucket_).embedding) {
        gradients_ready(output_bucket_, mb);
      }
    } else {
      receive(kBackwardDir, chunk, mb);
    }
  }
  void backward_layer_begin(int chunk, int mb, int layer) {
    const int b = bucket_of_layer_[static_cast<std::size_t>(layer)];
    if (b >= 0 && layer == bucket(b).last_layer && !bucket(b).output_layer) {
      use_for_backward(b, mb);
    }
    if (l_.recompute == Recompute::kFull) {
      attention(chunk, mb, layer, Pass::kRecompute);
      mlp(chunk, mb, layer, Pass::kRecompute);
    }
  }
  void backward_layer_end(int mb, int layer, Pass pass) {
    const int b = bucket_of_layer_[static_cast<std::size_t>(layer)];
    if (pass == Pass::kBackward && b >= 0 && layer == bucket(b).first_layer &&
        !bucket(b).embedding) {
      gradients_ready(b, mb);
    }
  }
  void backward_end(int chunk, int mb) {
    if (first_virtual(chunk)) {
      w_->chain(make(TaskKind::kCompute, Block::kEmbedding, Pass::kBackward, StreamKind::kCompute,
                     chunk, mb, kNoIndex));
      gradients_ready(embedding_bucket_, mb);
    } else {
      send(kBackwardDir, chunk, mb);
    }
  }

  // ---- combined forward-backward step (moe_a2a_overlap) ----

  // Megatron-Core's combined 1F1B (pipeline_parallel/combined_1f1b.py): where
  // the program runs a forward and a backward of different micro-batches back
  // to back (the 1F1B steady state; with pp = 1, micro-batch i+1's forward and
  // i's backward), it runs them as one step, layer by layer, each pass on its
  // own chain. The compute stream alternates between them so that each
  // all-to-all runs beside the other pass's compute (schedule_chunk_1f1b):
  //   compute: F.attn | B.mlp    | F.mlp    | B.attn
  //   ep:      B.a2a  | F.a2a    | B.a2a    | F.a2a
  // Forward layers go first to last, backward layers last to first; when one
  // chunk has more layers the rest run alone.
  static bool pairable(const PipelineOp& a, const PipelineOp& b) {
    const bool forward_backward = (a.kind == PassKind::kForward && b.kind == PassKind::kBackward) ||
                                  (a.kind == PassKind::kBackward && b.kind == PassKind::kForward);
    return forward_backward && a.microbatch != b.microbatch;
  }

  void combined(const PipelineOp& f, const PipelineOp& b) {
    const TaskWriter::Chain start = w_->save_chain();
    forward_begin(f.chunk, f.microbatch);
    TaskWriter::Chain fc = w_->save_chain();
    w_->restore_chain(start);
    backward_begin(b.chunk, b.microbatch);
    TaskWriter::Chain bc = w_->save_chain();
    // Only the all-to-all runs on its own stream in Megatron-Core's combined
    // step; tensor-parallel collectives stay on the compute stream. So a pass's
    // compute also waits for the TP collective of the other pass's compute
    // block just before it (not for the one after a combine, which waits on
    // the all-to-all stream).
    std::uint32_t f_tp = kNoTask, b_tp = kNoTask;
    const auto on = [&](TaskWriter::Chain& chain, std::uint32_t& own_tp, std::uint32_t other_tp,
                        bool computes, auto&& write) {
      w_->restore_chain(chain);
      if (computes && other_tp != kNoTask) w_->also_wait_for(DepRef::task(other_tp));
      const std::size_t first = plan_.tasks.size();
      write();
      for (std::size_t id = first; computes && id < plan_.tasks.size(); ++id) {
        const TaskKind k = plan_.tasks[id].kind;
        if (k == TaskKind::kTensorParallel || k == TaskKind::kTensorParallelTail) {
          own_tp = static_cast<std::uint32_t>(id);
        }
      }
      chain = w_->save_chain();
    };
    const int nf = layers_in_chunk(plan_.shape, stage_, f.chunk);
    const int nb = layers_in_chunk(plan_.shape, stage_, b.chunk);
    const int fm = f.microbatch, bm = b.microbatch;
    for (int i = 0; i < std::max(nf, nb); ++i) {
      const int fl = i < nf ? global_layer(plan_.shape, stage_, f.chunk, i) : -1;
      const int bl = i < nb ? global_layer(plan_.shape, stage_, b.chunk, nb - 1 - i) : -1;
      const Pass fw = Pass::kForward, bw = Pass::kBackward;
      if (fl >= 0) {
        on(fc, f_tp, b_tp, true, [&] { forward_layer_begin(fm, fl); attention(f.chunk, fm, fl, fw); });
      }
      if (bl >= 0) {
        on(bc, b_tp, f_tp, false, [&] {
          backward_layer_begin(b.chunk, bm, bl);
          mlp_dispatch(b.chunk, bm, bl, bw);
        });
      }
      if (fl >= 0) on(fc, f_tp, b_tp, false, [&] { mlp_dispatch(f.chunk, fm, fl, fw); });
      if (bl >= 0) on(bc, b_tp, f_tp, true, [&] { mlp_compute(b.chunk, bm, bl, bw); });
      if (fl >= 0) on(fc, f_tp, b_tp, true, [&] { mlp_compute(f.chunk, fm, fl, fw); });
      if (bl >= 0) on(bc, b_tp, f_tp, false, [&] { mlp_combine(b.chunk, bm, bl, bw); });
      if (fl >= 0) on(fc, f_tp, b_tp, false, [&] { mlp_combine(f.chunk, fm, fl, fw); });
      if (bl >= 0) {
        on(bc, b_tp, f_tp, true, [&] {
          attention(b.chunk, bm, bl, bw);
          backward_layer_end(bm, bl, bw);
        });
      }
    }
    on(fc, f_tp, b_tp, false, [&] { forward_end(f.chunk, fm); });
    on(bc, b_tp, f_tp, false, [&] { backward_end(b.chunk, bm); });
    w_->restore_chain(fc);
    w_->merge_chain(bc);
  }

  void weight_gradients(int chunk, int mb) {
    for (int j = layers_in_chunk(plan_.shape, stage_, chunk) - 1; j >= 0; --j) {
      const int layer = global_layer(plan_.shape, stage_, chunk, j);
      mlp(chunk, mb, layer, Pass::kBackwardWeight);
      attention(chunk, mb, layer, Pass::kBackwardWeight);
      const int b = bucket_of_layer_[static_cast<std::size_t>(layer)];
      if (b >= 0 && layer == bucket(b).first_layer && !bucket(b).embedding) gradients_ready(b, mb);
    }
  }

  const ModelConfig& m_;
  const ParallelLayout& l_;
  const PlanOptions& options_;
  Plan plan_;
  TaskWriter* w_ = nullptr;
  bool has_dp_ = false;

  // the stage being built
  int stage_ = 0;
  std::uint32_t last_dp_ = kNoTask;
  int first_bucket_ = 0;
  int embedding_bucket_ = -1;
  int output_bucket_ = -1;
  std::vector<int> bucket_of_layer_;
  std::vector<std::uint32_t> gather_;  // overlapped gathers not yet waited for, by bucket
  FsdpBehaviour fsdp_;                  // ZeRO-3 only
  std::vector<std::uint32_t> use_starts_;  // ZeRO-3: last compute before each unit use
  std::vector<std::uint32_t> reduces_;     // ZeRO-3: the stage's reduce-scatters in order
};

}  // namespace

Plan build_plan(const ModelConfig& model, const ParallelLayout& layout, const PlanOptions& options) {
  return PlanBuilder(model, layout, options).build();
}

}  // namespace sextant::sim
