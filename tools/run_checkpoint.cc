#include "tools/run_checkpoint.h"

#include "engine/checkpoint/save_across_ranks.h"

namespace sextant::tools {

namespace ckpt = engine::checkpoint;

ckpt::RunDescription checkpoint_run_of(const PreparedRun& run) {
  const RunSettings& s = run.settings;
  return {s.model, run.shape, s.layout, run.lr, s.seed, s.steps};
}

ckpt::CheckpointMetadata checkpoint_metadata_of(const PreparedRun& run, std::int64_t steps_done,
                                                std::int64_t data_batches, const RunSharding& sharding) {
  return ckpt::checkpoint_metadata_of(checkpoint_run_of(run), steps_done, data_batches, sharding);
}

void check_checkpoint_fits(const ckpt::OpenedCheckpoint& c, const PreparedRun& run) {
  ckpt::check_checkpoint_fits(c, checkpoint_run_of(run));
}

bool same_arrays(const ckpt::OpenedCheckpoint& c, const PreparedRun& run, const RunSharding& sharding) {
  return ckpt::same_arrays(c, run.settings.layout, sharding);
}

ckpt::TrainerState load_rank_state(const ckpt::OpenedCheckpoint& c, const PreparedRun& run,
                                   const RunSharding& sharding) {
  return ckpt::load_rank_state(c, run.settings.layout, run.world_rank, sharding);
}

std::string save_checkpoint(const PreparedRun& run, const ckpt::CheckpointMetadata& metadata,
                            const ckpt::TrainerState& state, const std::function<bool(bool)>& barrier) {
  return ckpt::save_across_ranks(run.settings.save_dir, run.settings.keep, run.world_rank, metadata, state, barrier);
}

}  // namespace sextant::tools
