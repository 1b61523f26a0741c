// What the training loop (training_loop.h) trains on one rank: a replica's
// Trainer (one GPU, dp, tp) or, with pp > 1, the rank's pipeline stage
// (engine/pipeline/). The loop reads both through this, so it stays one loop;
// make_rank_trainer chooses between them from the ParallelLayout.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/pipeline/pipeline_trainer.h"
#include "engine/trainer.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::training {

/// The rank's groups (engine/comm/parallel_groups.h), null where the layout has
/// no such parallelism; they must outlive the trainer.
struct RankGroups {
  comm::Communicator* data_parallel = nullptr;
  comm::Communicator* tensor_parallel = nullptr;
  comm::Communicator* pipeline = nullptr;
};

class RankTrainer {
 public:
  explicit RankTrainer(std::unique_ptr<Trainer> replica) : replica_(std::move(replica)) {}
  explicit RankTrainer(std::unique_ptr<pipeline::PipelineTrainer> stage) : stage_(std::move(stage)) {}

  StepResult step(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
    return replica_ ? replica_->step(inputs, targets) : stage_->step(inputs, targets);
  }
  int steps_done() const { return replica_ ? replica_->steps_done() : stage_->steps_done(); }
  checkpoint::TrainerState state() const { return replica_ ? replica_->state() : stage_->state(); }
  void restore(const checkpoint::TrainerState& s) { replica_ ? replica_->restore(s) : stage_->restore(s); }
  /// This rank's parameters: its tp shard, of its pipeline stage.
  std::int64_t parameter_count() const {
    return replica_ ? replica_->layout().parameter_count() : stage_->parameter_count();
  }
  std::size_t tasks_per_step() const { return replica_ ? replica_->tasks_per_step() : stage_->tasks_per_step(); }
  std::size_t arena_bytes() const { return replica_ ? replica_->arena_bytes() : stage_->arena_bytes(); }
  const ArenaPlan& memory_plan() const { return replica_ ? replica_->memory_plan() : stage_->memory_plan(); }
  int local_microbatches() const { return replica_ ? replica_->local_microbatches() : stage_->local_microbatches(); }
  /// Gradient buckets of the dp reduction: the Trainer's overlapped ones, or
  /// the pipeline stage's one after its schedule.
  std::size_t gradient_buckets() const {
    return replica_ ? replica_->gradient_buckets().size() : stage_->gradient_buckets().size();
  }
  const pipeline::PipelineTrainer* stage() const { return stage_.get(); }
  /// The replica's Trainer; null for a pipeline stage.
  const Trainer* replica() const { return replica_.get(); }
  /// After a non-finite gradient norm: the first tensor, in the whole model's
  /// order, whose gradient is not finite (engine/trainer_nonfinite.cc,
  /// engine/pipeline/pipeline_nonfinite.cc); "" when none is.
  std::string first_nonfinite_gradient() {
    return replica_ ? replica_->first_nonfinite_gradient() : stage_->first_nonfinite_gradient();
  }

 private:
  std::unique_ptr<Trainer> replica_;
  std::unique_ptr<pipeline::PipelineTrainer> stage_;
};

/// The rank's trainer for `layout`: its pipeline stage when pp > 1, else a
/// replica Trainer on transformer_shape_of(model, layout). Throws as their
/// constructors do (std::invalid_argument, kernels::CudaError).
std::unique_ptr<RankTrainer> make_rank_trainer(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                                               const TrainerOptions& options, const RankGroups& groups);

}  // namespace sextant::engine::training
