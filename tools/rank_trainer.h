// What `sextant run`'s loop trains on one rank: a replica's Trainer (one GPU,
// dp, tp) or, with pp > 1, the rank's pipeline stage (engine/pipeline/). The
// loop reads both through this, so it stays one loop.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/pipeline/pipeline_trainer.h"
#include "engine/trainer.h"

namespace sextant::tools {

class RankTrainer {
 public:
  explicit RankTrainer(std::unique_ptr<engine::Trainer> replica) : replica_(std::move(replica)) {}
  explicit RankTrainer(std::unique_ptr<engine::pipeline::PipelineTrainer> stage) : stage_(std::move(stage)) {}

  engine::StepResult step(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
    return replica_ ? replica_->step(inputs, targets) : stage_->step(inputs, targets);
  }
  int steps_done() const { return replica_ ? replica_->steps_done() : stage_->steps_done(); }
  engine::checkpoint::TrainerState state() const { return replica_ ? replica_->state() : stage_->state(); }
  void restore(const engine::checkpoint::TrainerState& s) { replica_ ? replica_->restore(s) : stage_->restore(s); }
  /// This rank's parameters: its tp shard, of its pipeline stage.
  std::int64_t parameter_count() const {
    return replica_ ? replica_->layout().parameter_count() : stage_->parameter_count();
  }
  std::size_t tasks_per_step() const { return replica_ ? replica_->tasks_per_step() : stage_->tasks_per_step(); }
  std::size_t arena_bytes() const { return replica_ ? replica_->arena_bytes() : stage_->arena_bytes(); }
  const engine::ArenaPlan& memory_plan() const { return replica_ ? replica_->memory_plan() : stage_->memory_plan(); }
  int local_microbatches() const { return replica_ ? replica_->local_microbatches() : stage_->local_microbatches(); }
  /// Gradient buckets of the dp reduction: the Trainer's overlapped ones, or
  /// the pipeline stage's one after its schedule.
  std::size_t gradient_buckets() const { return replica_ ? replica_->gradient_buckets().size() : 1; }
  const engine::pipeline::PipelineTrainer* stage() const { return stage_.get(); }
  /// The replica's Trainer; null for a pipeline stage.
  const engine::Trainer* replica() const { return replica_.get(); }
  /// After a non-finite gradient norm: the first tensor whose gradient is not
  /// finite (engine/trainer_nonfinite.cc); "" for a pipeline stage, which does
  /// not search its tensors yet.
  std::string first_nonfinite_gradient() { return replica_ ? replica_->first_nonfinite_gradient() : std::string(); }

 private:
  std::unique_ptr<engine::Trainer> replica_;
  std::unique_ptr<engine::pipeline::PipelineTrainer> stage_;
};

}  // namespace sextant::tools
