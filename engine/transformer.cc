#include "engine/transformer.h"

#include "engine/tensor_parallel/parallel_linear.h"

namespace sextant::engine {

using transformer::to_size;

Transformer::Transformer(const TransformerShape& shape, sim::Recompute recompute, int microbatches,
                         ArenaPlan& plan, const StageParts& parts, ArenaPlan::Place stored,
                         const transformer::MoeOptions& moe)
    : context_(shape),
      recompute_(recompute),
      norm_(context_),
      embedding_(context_, residual_),
      attention_(context_, residual_, norm_),
      mlp_(context_, residual_, norm_),
      moe_(shape.moe() ? std::make_unique<transformer::MoeLayer>(context_, residual_, norm_, moe, parts.first_layer)
                       : nullptr),
      first_layer_(parts.first_layer),
      output_(context_, residual_, norm_) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  const std::size_t Ts = to_size(s.norm_tokens());  // the residual stream's rows (T / tp under sp)
  const std::size_t h = to_size(s.hidden);
  constexpr auto kAct = MemoryCategory::kActivations;
  transformer::BufferReserver r(plan, stored, bindings_);
  // The parts ask in one fixed order, which is the arena's layout (the order
  // the buffers had before the model was split into its parts, so every one
  // keeps its place).
  //
  // What a micro-batch stores from its forward to its backward, this object's
  // own. First the residual stream's gradient: written by the backward's first
  // task (or received from the next stage), sent to the previous stage after
  // its last (the constructor's comment in transformer.h). Then one set per
  // layer, or, under full recomputation, each layer's input plus one shared
  // set the recomputed forward writes.
  r.own(residual_.gradient, "grad.residual", kAct, Ts * h);
  residual_.input.resize(to_size(s.num_layers));
  residual_.mid.resize(to_size(s.num_layers));
  const bool full = recompute_ == sim::Recompute::kFull;
  for (int i = 0; i < s.num_layers; ++i) {
    r.own(residual_.input[to_size(i)], transformer::layer_prefix(i) + "input", kAct, Ts * h);
    if (full && i > 0) continue;  // bound to layer 0's set in bind()
    block(Part::kAttention, i).reserve_layer(i, r);
    r.own(residual_.mid[to_size(i)], transformer::layer_prefix(i) + "mid", kAct, Ts * h);
    block(Part::kMlp, i).reserve_layer(i, r);
  }
  r.own(residual_.final_input, "final_norm.input", kAct, Ts * h);
  if (parts.output) output_.reserve_stored(r);

  // One micro-batch's pass buffers, reused by every layer and shared with
  // the plan's other Transformers; then the step's tokens, targets and losses;
  // then the workspaces.
  r.shared(residual_.scratch, "scratch", kAct, T * h);
  if (s.sequence_parallel) reserve_sequence_parallel(r);
  if (s.tp > 1) output_.reserve_cross_entropy(r);
  attention_.reserve_pass(r);
  bool dense_mlp = false;
  for (int i = 0; i < s.num_layers; ++i) dense_mlp = dense_mlp || !s.moe_layer(first_layer_ + i);
  if (dense_mlp) mlp_.reserve_pass(r);
  if (moe_) moe_->reserve_pass(r);
  if (parts.embedding) embedding_.reserve_tokens(microbatches, r);
  if (parts.output) output_.reserve_targets(microbatches, r);
  norm_.reserve_workspace(r);
  context_.reserve_bias_workspace(r);
  if (parts.embedding) embedding_.reserve_workspace(r);
  attention_.reserve_workspace(r);
  if (moe_) moe_->reserve_workspace(r);
  context_.reserve_gemm_workspace(r);
}

void Transformer::reserve_sequence_parallel(transformer::BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  const std::size_t Ts = to_size(s.norm_tokens());
  const std::size_t h = to_size(s.hidden);
  constexpr auto kAct = MemoryCategory::kActivations;
  tensor_parallel::SequenceParallel::Buffers& b = context_.sequence_parallel().buffers;
  // The norms' outputs all-gathered for the column-parallel GEMMs, the final
  // norm's before its all-gather, the residual stream's gradient all-gathered
  // for the row-parallel ones' backward, and the reduce-scattered input
  // gradients; one micro-batch's worth, reused by every layer.
  r.shared(b.gathered_input, "sp.gathered_norm", kAct, T * h);
  r.shared(b.norm_shard, "sp.final_norm_shard", kAct, Ts * h);
  r.shared(b.gathered_gradient, "sp.grad.residual_gathered", kAct, T * h);
  r.shared(b.gradient_shard, "sp.scratch_shard", kAct, Ts * h);
  if (s.tp_comm_overlap) r.shared(b.staging, "sp.overlap_staging", kAct, T * h);
}

void Transformer::bind(const DeviceArena& arena, const ParameterLayout& layout, ParameterBuffers parameters,
                       cudaStream_t stream, comm::Communicator* tensor_parallel,
                       comm::Communicator* expert_parallel, comm::Communicator* context_parallel) {
  bindings_.bind(arena);
  const bool full = recompute_ == sim::Recompute::kFull;
  attention_.bind(full);
  mlp_.bind(full);
  if (moe_) moe_->bind(full);
  if (full)
    for (std::size_t i = 1; i < residual_.mid.size(); ++i) residual_.mid[i] = residual_.mid[0];
  context_.bind(layout, parameters, stream, tensor_parallel, expert_parallel, context_parallel);
}

transformer::ResidualBlock& Transformer::block(Part part, int layer) {
  if (part == Part::kAttention) return attention_;
  if (context_.shape().moe_layer(first_layer_ + layer)) return *moe_;
  return mlp_;
}

void Transformer::tp_task(sim::TaskKind kind, Part part, int layer, bool backward, bool recompute) {
  if (kind == sim::TaskKind::kTensorParallelGather)
    tp_gather(part, layer, backward);
  else if (kind == sim::TaskKind::kTensorParallelScatter)
    tp_scatter(part, layer, backward, recompute);
  else
    tp_all_reduce_task(part, layer, backward, recompute);
}

void Transformer::output_gradient_received() {
  const TransformerShape& s = context_.shape();
  if (!s.residual_biases_from_norms() || s.num_layers == 0) return;  // else mlp_backward sums it
  const int fc2_bias = context_.layout().layer(s.num_layers - 1).fc2_bias;
  // The stream's gradient holds its rows: 1/tp of the tokens under sp (the
  // bias's partial sum, summed over tp with the other partial gradients).
  tensor_parallel::bias_gradient(context_.runtime(), context_.gradient(fc2_bias), residual_.gradient,
                                 static_cast<int>(s.norm_tokens()), s.hidden);
}

}  // namespace sextant::engine
