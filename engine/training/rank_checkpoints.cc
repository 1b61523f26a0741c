#include "engine/training/rank_checkpoints.h"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/checkpoint/save_across_ranks.h"

namespace sextant::engine::training {

int restore_rank(Trainer& trainer, const checkpoint::OpenedCheckpoint& checkpoint, int world_rank,
                 const checkpoint::RunSharding& sharding, data::TokenBatches& data, std::size_t tokens_per_step) {
  trainer.restore(checkpoint::load_rank_state(checkpoint, trainer.parallel_layout(), world_rank, sharding));
  const int batches = static_cast<int>(checkpoint.metadata.data_batches);
  std::vector<std::int32_t> inputs(tokens_per_step), targets(tokens_per_step);
  for (int i = 0; i < batches; ++i) data.next(inputs, targets);
  return batches;
}

std::string save_rank(const Trainer& trainer, const checkpoint::CheckpointMetadata& metadata,
                      const checkpoint::RunSharding& sharding, const std::string& root, int keep, int world_rank,
                      const std::function<bool(bool failed)>& barrier) {
  const checkpoint::TrainerState state = trainer.state();
  const std::uint64_t described = sharding.at(static_cast<std::size_t>(trainer.stage())).flat_elements;
  if (state.weights_bf16.size() != described)
    throw std::logic_error("checkpoint: rank " + std::to_string(world_rank) + " holds " +
                           std::to_string(state.weights_bf16.size()) + " weights; its stage's sharding describes " +
                           std::to_string(described));
  return checkpoint::save_across_ranks(root, keep, world_rank, metadata, state, barrier);
}

}  // namespace sextant::engine::training
