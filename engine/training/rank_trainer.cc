#include "engine/training/rank_trainer.h"

#include "engine/model/transformer_shape.h"

namespace sextant::engine::training {

std::unique_ptr<RankTrainer> make_rank_trainer(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                                               const TrainerOptions& options, const RankGroups& groups) {
  if (layout.pp > 1)
    return std::make_unique<RankTrainer>(std::make_unique<pipeline::PipelineTrainer>(
        model, layout, options, pipeline::PipelineGroups{groups.pipeline, groups.data_parallel, groups.tensor_parallel}));
  return std::make_unique<RankTrainer>(std::make_unique<Trainer>(model, transformer_shape_of(model, layout), options,
                                                                 groups.data_parallel, groups.tensor_parallel));
}

}  // namespace sextant::engine::training
