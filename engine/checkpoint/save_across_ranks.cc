#include "engine/checkpoint/save_across_ranks.h"

#include <exception>
#include <filesystem>

#include "engine/checkpoint/checkpoint_directory.h"
#include "sim/core/config_error.h"

namespace sextant::engine::checkpoint {

std::string save_across_ranks(const std::string& root, int keep, int world_rank, const CheckpointMetadata& metadata,
                              const TrainerState& state, const std::function<bool(bool)>& barrier) {
  // Every rank takes part in every barrier, also after a failure, so that no
  // rank waits forever for one that gave up; the failing rank rethrows its own
  // error, the others say where to look.
  auto step_all = [&](const std::function<void()>& work) {
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    if (barrier(error != nullptr)) {
      if (error) std::rethrow_exception(error);
      throw sim::ConfigError({{root, 0, 0, "--save",
                               "another rank could not write its part of checkpoint step-" +
                                   std::to_string(metadata.step) + " (its message is in its output)"}});
    }
  };
  step_all([&] {
    if (world_rank == 0) begin_save(root, metadata.step);
  });
  step_all([&] { write_rank_shard(root, metadata.step, world_rank, state); });
  std::string folder = (std::filesystem::path(root) / ("step-" + std::to_string(metadata.step))).string();
  step_all([&] {
    if (world_rank == 0) folder = commit_save(root, metadata, keep);
  });
  return folder;
}

}  // namespace sextant::engine::checkpoint
