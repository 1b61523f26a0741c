#include "engine/training/trainer_sharding.h"

#include <stdexcept>
#include <string>

namespace sextant::engine::training {

std::vector<checkpoint::CheckpointSharding> trainer_sharding(const Trainer& trainer, const sim::ModelConfig& model,
                                                             std::size_t bucket_elements) {
  // Context parallelism folds into dp (checkpoint_layout_of): the trainer's
  // buckets and optimizer shards are over its dp·cp replicas.
  sim::ParallelLayout layout = trainer.parallel_layout();
  layout.dp *= layout.cp;
  layout.cp = 1;
  if (layout.pp == 1)
    return {checkpoint::sharding_of(trainer.chunk_layout(0), layout.tp, trainer.flat_elements(),
                                    trainer.gradient_buckets(), layout.dp, layout.zero >= 1, layout.ep)};
  std::vector<checkpoint::CheckpointSharding> stages = checkpoint::pipeline_sharding(model, layout, bucket_elements);
  const int stage = trainer.stage();
  const checkpoint::CheckpointSharding& mine = stages.at(static_cast<std::size_t>(stage));
  std::vector<std::string> described;
  for (const checkpoint::TensorSharding& t : mine.tensors) described.push_back(t.name);
  if (described != trainer.tensor_names())
    throw std::logic_error("checkpoint: pipeline stage " + std::to_string(stage) +
                           "'s tensors are not the ones engine::checkpoint::pipeline_stage_sharding describes");
  if (!mine.optimizer_shards.empty() &&
      mine.optimizer_shards != checkpoint::optimizer_shards_of(trainer.gradient_buckets(), layout.dp, layout.ep,
                                                               layout.ep > 1 ? trainer.expert_gradient_buckets()
                                                                             : std::vector<bool>{}))
    throw std::logic_error("checkpoint: pipeline stage " + std::to_string(stage) +
                           "'s gradient buckets are not the ones engine::checkpoint::pipeline_stage_sharding describes");
  return stages;
}

}  // namespace sextant::engine::training
